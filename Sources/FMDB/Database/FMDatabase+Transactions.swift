import Foundation

extension FMDatabase {
    /// Begins the transaction of a transaction form (`inTransaction`, `runTransaction`) and counts the form
    /// open on the connection (Core/Connection+TransactionForms.swift); returns that connection, which
    /// `endTransactionForm` is given.
    func begin(_ kind: FMDBTransactionKind) throws -> Connection {
        defer { beginProbesKey = false }
        try runThrowing(kind.beginSQL)
        return try formBegan()
    }

    /// The form whose BEGIN or SAVEPOINT just succeeded is open on the connection.
    private func formBegan() throws -> Connection {
        let connection = try requireConnection()
        connection.transactionFormDidBegin()
        return connection
    }

    /// Ends a transaction form that began on `formConnection`: commits (`commit`) or rolls back its
    /// transaction, and counts the form closed.
    ///
    /// When SQLite rolled the transaction back after a statement of the block failed, nothing is left to
    /// commit or roll back: this throws `FMDatabaseError.transactionRolledBack` (the failed statement's code,
    /// `transactionWasRolledBack` true), even when the block asked to roll back. When the block ended the
    /// transaction itself (its own COMMIT, ROLLBACK, RELEASE; or closed the database), this throws
    /// SQLITE_MISUSE and commits nothing: whatever began since is not the form's.
    func endTransactionForm(_ formConnection: Connection, commit: Bool) throws {
        defer { formConnection.transactionFormDidEnd() }
        try recording { try checkFormTransaction(formConnection) }
        guard commit else {
            rollback()
            return
        }
        do {
            try runThrowing("commit transaction")  // Thrown, not logged: the caller gets it.
        } catch {
            // A COMMIT that failed may have ended the transaction (an I/O error: SQLite rolled it back), or
            // left it open (BUSY: it is rolled back here). Either way nothing of it was committed.
            if connection === formConnection, !isInTransaction, let cause = error as? FMDatabaseError {
                try recording { throw FMDatabaseError.transactionRolledBack(cause: cause) }
            }
            if isInTransaction { rollback() }
            throw error
        }
    }

    /// Throws unless the transaction a form began on `formConnection` is still open and nothing was committed
    /// since it began: `transactionRolledBack` when SQLite rolled it back, SQLITE_MISUSE when the block ended
    /// it itself (a transaction the block began again since is rolled back: it is not the form's to commit).
    private func checkFormTransaction(_ formConnection: Connection) throws {
        if let cause = formConnection.transactionAbortCause {
            throw FMDatabaseError.transactionRolledBack(cause: cause)
        }
        guard connection === formConnection else { throw FMDatabaseError.transactionEndedByBlock() }
        guard !formConnection.isAutocommit, !formConnection.committedDuringForm else {
            if isInTransaction { rollback() }
            throw FMDatabaseError.transactionEndedByBlock()
        }
    }

    /// Ends a transaction form whose block threw: rolls back what is left of its transaction (nothing when
    /// SQLite rolled it back already, or the block ended it) and counts the form closed.
    func abandonTransactionForm(_ formConnection: Connection) {
        defer { formConnection.transactionFormDidEnd() }
        if !formConnection.isTransactionAborted, connection === formConnection, isInTransaction { rollback() }
    }

    /// FMDB's transaction block shape: begin, run, commit unless `rollback` was set.
    /// The block is not called when BEGIN fails.
    ///
    /// When SQLite rolls the transaction back after a statement of the block failed (a full disk, an I/O
    /// error, an interrupt, `INSERT OR ROLLBACK`, ...), every later statement of the block is refused, and
    /// this throws an error whose `transactionWasRolledBack` is true: nothing of the block is committed.
    func runTransaction(kind: FMDBTransactionKind, _ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) throws
    {
        let formConnection = try begin(kind)
        var shouldRollback: ObjCBool = false
        block(self, &shouldRollback)
        try endTransactionForm(formConnection, commit: !shouldRollback.boolValue)
    }

    /// Runs `block` in a transaction: commits when it returns, rolls back when it throws.
    ///
    /// ```swift
    /// try db.inTransaction(.immediate) { db in
    ///     try db.executeUpdate("INSERT INTO t VALUES (?)", values: [1])
    /// }
    /// ```
    ///
    /// A transaction this form began is never half-committed. SQLite may roll the whole transaction back on
    /// its own when a statement fails (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_NOMEM`, `SQLITE_INTERRUPT`,
    /// `INSERT OR ROLLBACK`, `ON CONFLICT ROLLBACK`, a trigger's `RAISE(ROLLBACK, ...)`). From then on every
    /// statement the block runs on this connection fails without reaching SQLite (code 516,
    /// `SQLITE_ABORT_ROLLBACK`: "current transaction is aborted"), until the block ends; then this throws
    /// an error whose ``FMDatabaseError/transactionWasRolledBack`` is true and whose code is the failed
    /// statement's, even when the block caught the failure and returned. A block that throws gets its own
    /// error rethrown (nothing committed), unless it is the refusal of a statement after SQLite's rollback,
    /// which the block passed on: then this throws the rollback's error, with its cause's code, as when the
    /// block returns. A block that ends the transaction itself (its own `COMMIT`,
    /// `ROLLBACK` or `RELEASE`) makes this throw `SQLITE_MISUSE`: what it committed itself stays committed.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
    ///
    /// - Parameters:
    ///   - kind: how the transaction begins (`.exclusive` by default).
    ///   - block: the work; its result is returned.
    /// - Returns: what `block` returned, once committed.
    /// - Throws: BEGIN's or COMMIT's error, what `block` throws (after rolling back), or the error saying the
    ///   transaction was rolled back.
    @discardableResult
    public func inTransaction<T>(_ kind: FMDBTransactionKind = .exclusive, _ block: (FMDatabase) throws -> T) throws
        -> T
    {
        let formConnection = try begin(kind)
        let result: T
        do {
            result = try block(self)
        } catch {
            let cause = formConnection.transactionAbortCause
            abandonTransactionForm(formConnection)
            // The refusal after SQLite's rollback, passed on by the block: the form reports the rollback and
            // its cause (`SQLITE_FULL`, `SQLITE_INTERRUPT`, ...), which is what a caller can act on.
            if let cause, let refusal = error as? FMDatabaseError,
                refusal.extendedCode == FMDB.refusedOnAbortedTransaction
            {
                throw FMDatabaseError.transactionRolledBack(cause: cause)
            }
            throw error
        }
        try endTransactionForm(formConnection, commit: true)
        return result
    }
}

extension FMDatabase {
    /// Whether a transaction is open (`sqlite3_get_autocommit` is 0).
    public var isInTransaction: Bool {
        guard let connection else { return false }
        return !connection.isAutocommit
    }

    private func run(_ sql: String) -> Bool {
        recordingBool { try update(sql) { _ in } }
    }

    /// Begins an exclusive transaction, as FMDB's `beginTransaction`.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
    @discardableResult
    public func beginTransaction() -> Bool { run(FMDBTransactionKind.exclusive.beginSQL) }

    /// Begins a deferred transaction (locks taken on first use).
    @discardableResult
    public func beginDeferredTransaction() -> Bool { run(FMDBTransactionKind.deferred.beginSQL) }

    /// Begins an immediate transaction (the write lock taken now).
    @discardableResult
    public func beginImmediateTransaction() -> Bool { run(FMDBTransactionKind.immediate.beginSQL) }

    /// Begins an exclusive transaction.
    @discardableResult
    public func beginExclusiveTransaction() -> Bool { run(FMDBTransactionKind.exclusive.beginSQL) }

    /// Commits the open transaction.
    @discardableResult
    public func commit() -> Bool { run("commit transaction") }

    /// Rolls back the open transaction.
    @discardableResult
    public func rollback() -> Bool { run("rollback transaction") }

    // MARK: - Savepoints

    /// A savepoint name quoted as an SQL string literal.
    private static func quotedSavePointName(_ name: String) -> String {
        "'" + name.replacingOccurrences(of: "'", with: "''") + "'"
    }

    func runThrowing(_ sql: String) throws {
        try recording { try update(sql) { _ in } }
    }

    /// Starts a savepoint (`SAVEPOINT 'name'`).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_savepoint.html>
    public func startSavePoint(withName name: String) throws {
        try runThrowing("savepoint \(Self.quotedSavePointName(name));")
    }

    /// Releases a savepoint (`RELEASE SAVEPOINT 'name'`).
    public func releaseSavePoint(withName name: String) throws {
        try runThrowing("release savepoint \(Self.quotedSavePointName(name));")
    }

    /// Rolls back to a savepoint, which stays open (`ROLLBACK TO SAVEPOINT 'name'`).
    public func rollback(toSavePointWithName name: String) throws {
        try runThrowing("rollback transaction to savepoint \(Self.quotedSavePointName(name));")
    }

    /// Runs `block` inside a savepoint; setting `rollback.pointee = true` rolls it back.
    /// Savepoint names are unique per connection (no process-wide counter).
    ///
    /// ```swift
    /// let error = db.inSavePoint { rollback in
    ///     if !db.executeUpdate("INSERT INTO t VALUES (1)") { rollback.pointee = true }
    /// }
    /// ```
    ///
    /// When SQLite rolls the whole transaction back after a statement of the block failed (see
    /// ``inTransaction(_:_:)``), every later statement of the block is refused, and the error returned says
    /// so (``FMDatabaseError/transactionWasRolledBack``); a transaction form around this one reports it too.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_savepoint.html>
    ///
    /// - Parameter block: the work; set `rollback.pointee = true` to roll the savepoint back.
    /// - Returns: nil, or the error that starting, rolling back or releasing the savepoint met, or the error
    ///   saying SQLite rolled the transaction back.
    @discardableResult
    public func inSavePoint(_ block: (UnsafeMutablePointer<ObjCBool>) -> Void) -> Error? {
        savePointCounter += 1
        let name = "dbSavePoint\(savePointCounter)"
        let formConnection: Connection
        do {
            try startSavePoint(withName: name)
            formConnection = try formBegan()
        } catch {
            return error
        }
        var shouldRollback: ObjCBool = false
        block(&shouldRollback)
        defer { formConnection.transactionFormDidEnd() }
        do {
            try recording { try checkFormTransaction(formConnection) }
            if shouldRollback.boolValue {
                // Roll back to the savepoint, then release it so it does not stay on the stack.
                try rollback(toSavePointWithName: name)
            }
            try releaseSavePoint(withName: name)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - WAL checkpoints

    /// Checkpoints the WAL of every attached database.
    public func checkpoint(_ mode: FMDBCheckpointMode) throws {
        try checkpoint(mode, name: nil, logFrameCount: nil, checkpointCount: nil)
    }

    /// Checkpoints the WAL of `name` (nil: every attached database).
    public func checkpoint(_ mode: FMDBCheckpointMode, name: String?) throws {
        try checkpoint(mode, name: name, logFrameCount: nil, checkpointCount: nil)
    }

    /// Checkpoints the WAL of `name` (nil: every attached database).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>
    public func checkpoint(
        _ mode: FMDBCheckpointMode,
        name: String?,
        logFrameCount: UnsafeMutablePointer<Int32>?,
        checkpointCount: UnsafeMutablePointer<Int32>?
    ) throws {
        try recording {
            let connection = try requireConnection()
            try connection.checkpoint(
                mode: mode.rawValue, name: name, logFrameCount: logFrameCount, checkpointCount: checkpointCount)
        }
    }
}
