extension BlockCancellation {
    /// Runs `body` with `db`'s connection open to interrupts from `cancel()`: `run(interrupting:_:)` for
    /// the connection `db` has now (Core/ names no type of the features above it: README, "Layout").
    func run<T>(on db: FMDatabase, _ body: () throws -> T) throws -> T {
        try run(interrupting: db.interruptHandle, body)
    }
}

extension FMDatabase {
    /// A handle another thread may use to interrupt this connection (a queue's or pool's `interrupt()`, a
    /// cancelled task's `BlockCancellation`); nil when closed.
    var interruptHandle: InterruptHandle? { connection?.interruptHandle }
}
