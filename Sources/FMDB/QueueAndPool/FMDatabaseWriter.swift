import Foundation
import Logging

/// A queue or a pool: anything that runs blocks on (keyed) connections to one database. Code written once
/// over `any FMDatabaseWriter` or `some FMDatabaseWriter` (a migrator, a service layer) serves both.
///
/// ```swift
/// func countNotes(in writer: some FMDatabaseWriter) throws -> Int {
///     try writer.inDatabase { db in
///         let rs = try db.executeQuery("SELECT count(*) FROM notes", values: nil)
///         defer { rs.close() }
///         return try rs.nextWithError() ? Int(rs.long(forColumnIndex: 0)) : 0
///     }
/// }
/// let queueCount = try countNotes(in: queue)
/// let poolCount = try countNotes(in: pool)
/// ```
///
/// The requirements are what each type does its own way (run a block on a connection, run a transaction
/// of a kind, change or replace the key); what both offer the same way is written once, in an extension.
/// Do not declare new conformances: only ``FMDatabaseQueue`` and ``FMDatabasePool`` are valid.
///
/// - Note: FMDB compatibility: a Swift-native addition (GRDB's `DatabaseWriter`).
public protocol FMDatabaseWriter: AnyObject, Sendable {
    /// The path given at init (nil: in-memory).
    var path: String? { get }
    /// The `sqlite3_open_v2` flags given at init.
    var openFlags: Int32 { get }
    /// The VFS name given at init.
    var vfsName: String? { get }
    /// Where the queue or pool and its connections log (each connection's ``FMDatabase/logger``).
    var logger: Logger { get }
    /// Whether the queue or pool logs the errors its FMDB forms meet and do not throw, and each connection's
    /// starting ``FMDatabase/logsErrors``. Errors a throwing form throws, or `inSavePoint` returns, are never
    /// logged: the caller has them. True unless the configuration said false.
    ///
    /// ```swift
    /// let queue = try FMDatabaseQueue(path: path, configuration: FMDatabaseConfiguration(logsErrors: false))
    /// ```
    var logsErrors: Bool { get }
    /// The last error met while supplying a database to a block (open, key, BEGIN), or nil.
    var lastError: Error? { get }

    /// Runs a throwing `block` with a connection and returns its result: the queue's one connection, on the
    /// queue, or one of the pool's (calls on a pool may nest: each gets its own connection).
    ///
    /// ```swift
    /// let names: [String] = try writer.inDatabase { db in
    ///     let rs = try db.executeQuery("SELECT name FROM people", values: nil)
    ///     var names: [String] = []
    ///     while rs.next() { names.append(rs.string(forColumnIndex: 0) ?? "") }
    ///     return names
    /// }
    /// ```
    /// - Throws: the block's error, or the error met opening or keying the database.
    func inDatabase<T>(_ block: (FMDatabase) throws -> T) throws -> T

    /// Runs `block` in a transaction and returns its result: commits when it returns, rolls back when it
    /// throws (and rethrows). A pool's transaction first queues behind the file's earlier transactions in
    /// this process (first come, first served), then takes a connection.
    ///
    /// ```swift
    /// try writer.inTransaction(.immediate) { db in
    ///     try db.executeUpdate("UPDATE accounts SET balance = balance - 10 WHERE id = ?", values: [1])
    ///     try db.executeUpdate("UPDATE accounts SET balance = balance + 10 WHERE id = ?", values: [2])
    /// }
    /// ```
    /// - Throws: the error that kept the transaction from starting (no connection; for a pool, `SQLITE_BUSY`
    ///   from another process or `transactionQueueTimeout`, `SQLITE_MISUSE` for a pool transaction nested on
    ///   the same thread), BEGIN's or COMMIT's error, or what `block` throws (after rolling back).
    func inTransaction<T>(_ kind: FMDBTransactionKind, _ block: (FMDatabase) throws -> T) throws -> T

    /// Runs `block` with a connection without blocking the calling task: the work is scheduled on the
    /// queue's own thread, or on a Dispatch thread for a pool (which waits there for a connection), and the
    /// task is resumed with the result.
    ///
    /// ```swift
    /// let count = try await writer.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
    /// ```
    ///
    /// Cancelling the task interrupts the statement the block is running (`sqlite3_interrupt`), and every
    /// statement the block starts afterwards (SQLite's progress handler, asked every 1,000 steps): they fail
    /// with `SQLITE_INTERRUPT`, and the call throws `CancellationError` once the block has returned (whatever
    /// it returned or threw). A call cancelled while it waits for its turn on the queue, or for a connection
    /// of the pool (at ``FMDatabasePool/maximumNumberOfDatabasesToCreate``), throws `CancellationError` at
    /// once and never runs the block. What the block wrote before the interrupt stays written: use
    /// ``performTransaction(_:_:)`` to undo it. The connection stays usable.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/interrupt.html>
    ///
    /// - Throws: `CancellationError` when the task was cancelled, the block's error, or the error met
    ///   opening or keying the database.
    func perform<T: Sendable>(_ block: @escaping @Sendable (FMDatabase) throws -> T) async throws -> T

    /// ``inTransaction(_:_:)`` without blocking the calling task (the queue and the pool give `kind` the
    /// default `.exclusive`).
    ///
    /// ```swift
    /// try await writer.performTransaction(.immediate) { db in
    ///     try db.executeUpdate("INSERT INTO t VALUES (?)", values: [1])
    /// }
    /// ```
    ///
    /// Cancelling the task interrupts the statement the block is running (`sqlite3_interrupt`) and every
    /// statement it starts afterwards (SQLite's progress handler, asked every 1,000 steps), rolls the
    /// transaction back, and throws `CancellationError`; a cancellation that comes after the block returned
    /// and before COMMIT rolls back too. A call cancelled while it waits for its turn (on the queue; for a
    /// pool, behind the file's other transactions, or for a connection) throws `CancellationError` at once
    /// and never begins a transaction. The connection stays usable.
    ///
    /// An interrupted write makes SQLite roll the whole transaction back at once: the statements the block
    /// runs after it fail without reaching SQLite (code 516, `SQLITE_ABORT_ROLLBACK`), so nothing of the block
    /// is committed even when it goes on (see ``FMDatabase/inTransaction(_:_:)``).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/interrupt.html>
    ///
    /// - Throws: `CancellationError` when the task was cancelled (nothing was committed), or what
    ///   ``inTransaction(_:_:)`` throws; an error whose ``FMDatabaseError/transactionWasRolledBack`` is true
    ///   when SQLite rolled the transaction back after a statement of the block failed.
    func performTransaction<T: Sendable>(
        _ kind: FMDBTransactionKind, _ block: @escaping @Sendable (FMDatabase) throws -> T
    ) async throws -> T

    /// Changes the key with SQLCipher's rekey, safely (``FMDatabase/rekeySafely(using:busyTimeout:)``), and
    /// every connection with it: the queue rekeys on its queue (outside any block and any transaction); the
    /// pool waits for a moment when every connection is checked in (new checkouts then wait), rekeys on one,
    /// and closes the others so later ones open with the new key. The busy timeout is at least 5 seconds (or
    /// the connections' `maxBusyRetryTimeInterval` when longer; ``rekey(using:busyTimeout:)`` sets it). Which
    /// key opens the file afterwards is checked on a fresh connection, and the WAL is checkpointed (TRUNCATE)
    /// so no page under the old key stays behind. The queue or pool switches to the new provider from the
    /// moment the key changed, even when only the checkpoint is pending; other keyed queues and pools of this
    /// process on the file are handed it too.
    ///
    /// ```swift
    /// if case .checkpointPending(let error) = try writer.rekey(using: newProvider) {
    ///     print("rekeyed; the WAL checkpoint is pending: \(error.message)")
    /// }
    /// ```
    /// - Returns: `.done`, or `.checkpointPending` (the key did change).
    /// - Throws: when the rekey did not take; the database then still opens with the old key, and the queue
    ///   or pool keeps the old provider.
    @discardableResult
    func rekey(using provider: any KeyProvider) throws -> FMRekeyOutcome

    /// ``rekey(using:)`` with the busy timeout given: how long the rekey and then its WAL checkpoint each wait
    /// for other connections' locks (other processes', and this process's outside the pool). NaN, zero and
    /// negatives do not wait; infinity is SQLite's longest, about 24.8 days, for which a pool's checkouts wait
    /// too. The check of which key opens the file afterwards still waits at least 1 second per attempt.
    ///
    /// ```swift
    /// let outcome = try writer.rekey(using: newProvider, busyTimeout: 30)
    /// ```
    /// - Returns: `.done`, or `.checkpointPending` (the key did change).
    /// - Throws: when the rekey did not take; the database then still opens with the old key, and the queue
    ///   or pool keeps the old provider.
    @discardableResult
    func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval) throws -> FMRekeyOutcome

    /// Hands the queue or pool a new key provider, for a database whose key changed outside this process (an
    /// operator's `fmdb-cipher rekey`, a new key file): a typical SIGHUP handler. (A systemd credential is
    /// written when the service starts and not again at `systemctl reload`: a new one needs a restart.)
    ///
    /// The provider is checked first, on a new connection that must open and read the file (and is set up
    /// with `prepareDatabase`); when it does not, this throws and the queue or pool keeps its provider and
    /// connections. When it does, that connection replaces the queue's, or is checked in for the pool's next
    /// block: a pool keys every later connection with the provider, closes its idle connections now and its
    /// checked-out ones when their blocks return (running blocks are not interrupted). A queue runs it on the
    /// queue, after the block running now: it must not be called from a block of the queue. A ``rekey(using:)``
    /// of a pool and this call wait for each other, and a rekey through another queue or pool of the file that
    /// lands meanwhile makes it check the provider again: the provider kept is always one that opens the file
    /// as it is.
    ///
    /// ```swift
    /// let reload = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .main)
    /// reload.setEventHandler {
    ///     do {
    ///         let key = try KeyMaterial.read(from: .file(path: "/etc/app/db.key"), describedAs: "database key")
    ///         try writer.replaceKeyProvider(RawKeyProvider(material: key))
    ///     } catch {
    ///         logger.error("the new key does not open the database; the old one stays in use: \(error)")
    ///     }
    /// }
    /// ```
    ///
    /// To change the key of the database itself, use ``rekey(using:)``.
    ///
    /// - Parameter provider: The provider of the key the database is under now.
    /// - Throws: `FMDatabaseError`: code 26 when its key does not open the database, the open error, or what
    ///   `prepareDatabase` threw. Nothing changed then.
    /// - Note: FMDB compatibility: FMDB has no key providers; this is an addition.
    func replaceKeyProvider(_ provider: any KeyProvider) throws
}
