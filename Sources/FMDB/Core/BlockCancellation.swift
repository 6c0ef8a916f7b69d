import Foundation

/// Ties one `perform` / `performTransaction` call of a queue or pool to its Swift task's cancellation.
///
/// The task's cancellation handler calls `cancel()` from any thread; the thread running the block calls
/// `run(on:_:)`. While the block runs, `cancel()` interrupts the block's connection
/// (`sqlite3_interrupt`, which SQLite allows from another thread while the connection is open): the
/// running statement stops with `SQLITE_INTERRUPT`. The interrupt handle is only held between the start
/// and the end of `run`, under the lock `cancel()` takes, so no interrupt can reach the connection after
/// the block is done with it (when it may already serve another block, or be closed). A statement the block
/// starts after the cancellation stops too: while the block runs, SQLite's progress handler asks every 1,000
/// virtual-machine steps whether the call was cancelled.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/interrupt.html>
///
/// Sendable: its one mutable value is `Protected`.
final class BlockCancellation: Sendable {
    private struct State {
        var isCancelled = false
        var target: InterruptHandle?
    }

    private let state = Protected(State())

    init() {}

    /// Whether the task was cancelled (at any time so far).
    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// Marks the call cancelled and interrupts the statement its block is running, if any.
    func cancel() {
        state.withLock { state in
            state.isCancelled = true
            state.target?.interrupt()
        }
    }

    /// Runs `body` with the connection of `handle` (the block's connection; nil: none open) open to
    /// interrupts from `cancel()`. (Queues and pools call it with an `FMDatabase`: `run(on:_:)`.)
    ///
    /// - Throws: `CancellationError` without running `body` when the call was cancelled before it started;
    ///   `CancellationError` in place of whatever `body` threw or returned when the call was cancelled
    ///   while it ran (inside a transaction, throwing rolls it back); otherwise what `body` throws.
    func run<T>(interrupting handle: InterruptHandle?, _ body: () throws -> T) throws -> T {
        try state.withLock { state in
            if state.isCancelled { throw CancellationError() }
            state.target = handle
        }
        // Statements the block starts after a cancellation stop too (`sqlite3_interrupt` only stops the one
        // running). `self` outlives the check: it is removed below, before `run` returns.
        handle?.installCancellationCheck(self)
        let result = Result { try body() }
        handle?.removeCancellationCheck()
        let cancelled = state.withLock { state in
            state.target = nil
            return state.isCancelled
        }
        if cancelled { throw CancellationError() }
        return try result.get()
    }
}
