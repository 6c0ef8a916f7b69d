import Foundation
import Logging

/// The few primitives ``FMDatabaseQueue`` and ``FMDatabasePool`` each implement their own way, below the
/// public requirements of ``FMDatabaseWriter``; the extension builds what both do the same way from them
/// (the async shells, the transaction form, error recording, connection set-up), written once.
protocol DatabaseWriterCore: FMDatabaseWriter {
    /// Sets up each new connection after it is keyed, before any block gets it (the configuration's
    /// `connectionSetUp`; immutable).
    var prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? { get }
    /// The busy timeout each connection gets as it opens, before its key check (nil: FMDB's default).
    var busyTimeout: TimeInterval? { get }

    /// Keeps `error` for `lastError`.
    func storeLastError(_ error: FMDatabaseError)

    /// Runs `work` for an async caller: on the queue's own thread, or on a Dispatch thread for a pool (never on
    /// the cooperative pool's threads, which must not wait).
    func scheduleAsync(_ work: @escaping @Sendable () -> Void)

    /// Wakes the calls waiting for a connection or a turn, so a cancelled one stops waiting (nothing for a
    /// queue, whose waiting calls `QueuedCall` ends).
    func wakeWaitersAfterCancellation()

    /// Runs `body` on a connection, telling a block stopped by a key change made elsewhere so; from the thread
    /// the work runs on (a queue's: on the queue). `cancellation`: the task of an async call, whose
    /// cancellation ends a wait for a connection.
    func withConnection<T>(cancellation: BlockCancellation?, _ body: (FMDatabase) throws -> T) throws -> T

    /// Runs a transaction of `kind` on a connection: `body` begins and ends it, and calls `markStarted` as its
    /// block starts. When BEGIN met the file under a key changed elsewhere before the block started, the
    /// transaction begins again on a new connection (a bounded number of times); the block runs at most once.
    /// A queue's runs on the queue; a pool's takes its turn at the file's write gate first.
    func withTransactionConnection<T>(
        _ kind: FMDBTransactionKind, cancellation: BlockCancellation?,
        _ body: (FMDatabase, _ markStarted: () -> Void) throws -> T
    ) throws -> T
}

extension DatabaseWriterCore {
    /// `path` as a log line or an error shows it (a `file:` URI without its query, which may hold a key).
    var shownPath: String { SQLRedaction.loggablePath(path ?? ":memory:") }

    // MARK: - Connections

    /// Opens, keys and sets up (`prepareDatabase`) a new connection; closes it when any step fails, and
    /// removes the files it created when the database did not exist.
    func openConnection(keyProvider: (any KeyProvider)?) throws -> FMDatabase {
        try FMDatabase.openShared(
            path: path, flags: openFlags, vfs: vfsName, keyProvider: keyProvider, logger: logger,
            logsErrors: logsErrors, busyTimeout: busyTimeout,
            prepare: { try self.prepareDatabase?($0) })
    }

    /// Runs `prepareDatabase` on a connection new to the queue or pool; closes it when that throws.
    func prepare(_ db: FMDatabase) throws {
        guard let prepareDatabase else { return }
        do {
            try prepareDatabase(db)
        } catch {
            db.closeAsOwner()
            throw error
        }
    }

    /// After a rekey on `db`: when the rekey reopened the connection (a new SQLite handle than
    /// `connectionBefore`), what `prepareDatabase` set on the old one is gone, so the new one is set up again;
    /// when that fails, it is closed (the key did change) and the next call opens a new one. Returns whether
    /// the connection was reopened (a pool tells its delegate about it again).
    @discardableResult
    func setUpAfterRekey(_ db: FMDatabase, connectionBefore: ObjectIdentifier?) -> Bool {
        guard db.isOpen, db.connection.map(ObjectIdentifier.init) != connectionBefore else { return false }
        do {
            try prepare(db)
        } catch {
            logger.warning(
                """
                After the rekey, the reopened connection could not be set up (prepareDatabase threw); it was \
                closed: \(error)
                """
            )
        }
        return true
    }

    // MARK: - Errors

    /// Keeps an error for `lastError`, and logs it when `logs` (the FMDB forms that cannot hand it to their
    /// caller; see `logUnthrown`). `what` names what failed in the log line.
    @discardableResult
    func record(_ error: Error, logs: Bool = true, _ what: String = "could not supply a database") -> FMDatabaseError {
        let value = (error as? FMDatabaseError) ?? FMDatabaseError(code: SQLITE_ERROR, message: "\(error)")
        storeLastError(value)
        if logs { logUnthrown(value, what) }
        return value
    }

    /// Logs an error an FMDB form met and could not hand to its caller, when `logsErrors`.
    func logUnthrown(_ error: Error, _ what: String = "could not supply a database") {
        guard logsErrors else { return }
        let message = (error as? FMDatabaseError)?.message ?? "\(error)"
        logger.error("\(String(describing: Self.self)) \(what) for \(shownPath): \(message)")
    }

    // MARK: - Transactions and async calls

    /// `block` in a transaction of `kind` (``FMDatabase/inTransaction(_:_:)``) on a connection: commits when
    /// it returns, rolls back when it throws. With `cancellation`, a cancelled task begins no transaction, and
    /// its cancellation interrupts the block's statements.
    func runTransaction<T>(
        _ kind: FMDBTransactionKind, cancellation: BlockCancellation? = nil, _ block: (FMDatabase) throws -> T
    ) throws -> T {
        try withTransactionConnection(kind, cancellation: cancellation) { db, markStarted in
            if cancellation?.isCancelled == true { throw CancellationError() }
            return try db.inTransaction(kind) { db in
                markStarted()
                guard let cancellation else { return try block(db) }
                return try cancellation.run(on: db) { try block(db) }
            }
        }
    }

    /// `FMDatabaseWriter.perform(_:)`: `block` on a connection, for an async caller.
    func performBlock<T: Sendable>(_ block: @escaping @Sendable (FMDatabase) throws -> T) async throws -> T {
        try await runAsync { cancellation in
            // The connection is tidied (result sets closed, a transaction left open rolled back) or checked
            // in before the task resumes.
            try self.withConnection(cancellation: cancellation) { db in
                try cancellation.run(on: db) { try block(db) }
            }
        }
    }

    /// `FMDatabaseWriter.performTransaction(_:_:)`: `block` in a transaction, for an async caller.
    func performTransactionBlock<T: Sendable>(
        _ kind: FMDBTransactionKind, _ block: @escaping @Sendable (FMDatabase) throws -> T
    ) async throws -> T {
        try await runAsync { cancellation in try self.runTransaction(kind, cancellation: cancellation, block) }
    }

    /// Runs `work` where `scheduleAsync` puts it and resumes the task with its result. A task cancelled before
    /// the work's turn came resumes at once with `CancellationError`, and the work never runs; once it runs,
    /// the cancellation reaches it through the `BlockCancellation` it is given (interrupts, waits that end).
    private func runAsync<T: Sendable>(
        _ work: @escaping @Sendable (BlockCancellation) throws -> T
    ) async throws -> T {
        let cancellation = BlockCancellation()
        let call = QueuedCall<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                call.attach(continuation)
                scheduleAsync {
                    guard call.start() else { return }  // Cancelled while it waited for the turn.
                    call.finish(Result { try work(cancellation) })
                }
            }
        } onCancel: {
            cancellation.cancel()
            call.cancel()
            wakeWaitersAfterCancellation()
        }
    }
}
