import Dispatch
import Foundation
import Logging

/// Serializes every use of one `FMDatabase` on a private serial queue: FMDB's `FMDatabaseQueue`.
///
/// ```swift
/// let queue = try FMDatabaseQueue(path: path, keyProvider: PBKDF2KeyProvider(passphrase: "secret"))
/// queue.inDatabase { db in
///     db.executeUpdate("INSERT INTO t VALUES (?)", 1)
/// }
/// queue.inTransaction { db, rollback in
///     if !db.executeUpdate("INSERT INTO t VALUES (?)", 2) { rollback.pointee = true }
/// }
/// let count = try queue.inDatabase { db in try db.executeQuery("SELECT count(*) FROM t", values: nil) }
/// ```
///
/// Blocks run one at a time, in the order called, and the calls block. Calling the queue from inside
/// one of its own blocks is a programming error reported with a precondition failure (it would
/// deadlock). After `close()` the next call reopens (and re-keys) the database.
///
/// Sendable: safe to share between threads and tasks.
///
/// Related SQLite documentation: <https://www.sqlite.org/threadsafe.html>
///
/// - Note: FMDB compatibility: when the database cannot be opened (or keyed), FMDB passed nil to a
///   non-optional block; here the block is not called, the error is logged and kept in `lastError`,
///   and the Swift-native throwing variants throw it. When BEGIN fails, the transaction block is not
///   called either. Result sets left open by a block are closed after it (FMDB only warned), except
///   reusable ones from `FMDatabase.prepare(_:)`; a transaction left open by a block is rolled back, with
///   a warning, as the pool does (FMDB's queue left it open for the next block).
public final class FMDatabaseQueue: FMDatabaseWriter, @unchecked Sendable {
    // @unchecked Sendable. Lock invariant: `database` and `keyProvider` are read and written only on
    // `dispatchQueue` (a serial queue), so one thread at a time touches the FMDatabase. `lastErrorBox`
    // and `interruptTarget` are `Protected` (lock-guarded), readable from any thread.

    public let path: String?
    public let openFlags: Int32
    public let vfsName: String?
    public let logger: Logger
    public let logsErrors: Bool

    private let dispatchQueue: DispatchQueue
    private let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    var database: FMDatabase?
    var keyProvider: (any KeyProvider)?
    /// Runs on the connection each time the queue opens it, after keying, before any block (immutable).
    let prepareDatabase: (@Sendable (FMDatabase) throws -> Void)?
    /// The configuration's busy timeout, set on each connection as it opens (nil: FMDB's default).
    let busyTimeout: TimeInterval?
    private let lastErrorBox = Protected<FMDatabaseError?>(nil)
    /// A provider handed over by a rekey through another queue or pool on the same file, taken up by
    /// the next call on the queue (`Protected`: set from any thread).
    let adoptedProvider = Protected<(any KeyProvider)?>(nil)
    /// How many providers rekeys through other queues or pools handed over (`Protected`: set from any
    /// thread): a `replaceKeyProvider` that checked its provider before one landed checks it again.
    let adoptions = Protected(0)
    /// The path under which the queue is in the process-wide ``KeyChangeRegistry``; written only by a keyed
    /// initializer.
    var keyPath: String?
    let interruptTarget = Protected<InterruptHandle?>(nil)

    public var lastError: Error? { lastErrorBox.withLock { $0 } }

    // MARK: - Initializers

    /// A queue set up by `configuration`: its connection opened now, and keyed and verified when the
    /// configuration has a key provider. A pool's limits in the configuration do not apply to a queue.
    ///
    /// The configuration's `prepareDatabase` runs each time the queue opens its connection, after it is keyed
    /// and verified: at this initializer, when a call reopens it after ``close()``, and when a rekey had to
    /// reopen it. It runs on the queue: it must not call the queue.
    ///
    /// ```swift
    /// var configuration = FMDatabaseConfiguration(keyProvider: provider)
    /// configuration.prepareDatabase = { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil) }
    /// let queue = try FMDatabaseQueue(path: path, configuration: configuration)
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/foreignkeys.html#fk_enable>
    ///
    /// - Parameters:
    ///   - path: The database file; nil for an in-memory database.
    ///   - flags: `sqlite3_open_v2` flags.
    ///   - vfs: The VFS name, or nil for the default.
    ///   - configuration: The key provider, logging and connection set-up.
    /// - Throws: `FMDatabaseError`: code 26 for a wrong key, the open error, or what `prepareDatabase` threw.
    /// - Note: FMDB compatibility: a Swift-native addition (GRDB's `Configuration`). Unlike FMDB's failable
    ///   initializers, an open error is thrown, not returned as nil.
    public convenience init(
        path: String?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        configuration: FMDatabaseConfiguration
    ) throws {
        self.init(uncheckedPath: path, flags: flags, vfs: vfs, configuration: configuration)
        try onQueue { try self.openDatabase() }
        guard configuration.keyProvider != nil else { return }
        keyPath = KeyChangeRegistry.registeredPath(path)
        KeyChangeRegistry.shared.register(self, path: keyPath)
    }

    /// A queue set up by `configuration`, for a file URL (see ``init(path:flags:vfs:configuration:)``).
    public convenience init(
        url: URL?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        configuration: FMDatabaseConfiguration
    ) throws {
        try self.init(path: url?.path, flags: flags, vfs: vfs, configuration: configuration)
    }

    /// Opens, keys and verifies the database at init: ``init(path:flags:vfs:configuration:)`` with only a
    /// key provider.
    /// - Throws: `FMDatabaseError`: code 26 for a wrong key (or a plaintext file), the open error otherwise.
    public convenience init(
        path: String?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        keyProvider: any KeyProvider
    ) throws {
        try self.init(path: path, flags: flags, vfs: vfs, configuration: .init(keyProvider: keyProvider))
    }

    /// The keyed initializer, for a file URL (see ``init(path:flags:vfs:keyProvider:)``).
    public convenience init(
        url: URL?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        keyProvider: any KeyProvider
    ) throws {
        try self.init(path: url?.path, flags: flags, vfs: vfs, configuration: .init(keyProvider: keyProvider))
    }

    /// An in-memory database.
    public convenience init() {
        // Opening an in-memory database only fails when memory is exhausted: the next call opens it again,
        // and gets the error.
        self.init(
            uncheckedPath: nil, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil,
            configuration: FMDatabaseConfiguration())
        _ = try? onQueue { try self.openDatabase() }
    }

    /// A database at `path`, read-write, created if needed (see ``init(path:flags:vfs:)``).
    public convenience init?(path: String?) {
        self.init(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at a file URL, read-write, created if needed (see ``init(path:flags:vfs:)``).
    public convenience init?(url: URL?) {
        self.init(path: url?.path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at `path`, opened with `flags` (see ``init(path:flags:vfs:)``).
    public convenience init?(path: String?, flags: Int32) {
        self.init(path: path, flags: flags, vfs: nil)
    }

    /// A database at a file URL, opened with `flags` (see ``init(path:flags:vfs:)``).
    public convenience init?(url: URL?, flags: Int32) {
        self.init(path: url?.path, flags: flags, vfs: nil)
    }

    /// Opens the database at init; nil when it cannot be opened (the error is kept in `lastError` and logged).
    /// ``init(path:flags:vfs:configuration:)`` sets up logging and each connection, and throws the error.
    ///
    /// ```swift
    /// guard let queue = FMDatabaseQueue(path: path, flags: SQLITE_OPEN_READWRITE, vfs: nil) else { return }
    /// ```
    ///
    /// - Parameters:
    ///   - path: The database file; nil for an in-memory database.
    ///   - flags: `sqlite3_open_v2` flags.
    ///   - vfs: The VFS name, or nil for the default.
    public convenience init?(path: String?, flags: Int32, vfs: String?) {
        self.init(uncheckedPath: path, flags: flags, vfs: vfs, configuration: FMDatabaseConfiguration())
        do {
            try onQueue { try self.openDatabase() }
        } catch {
            record(error)
            return nil
        }
    }

    /// A database at a file URL, opened with `flags` and a VFS (see ``init(path:flags:vfs:)``).
    public convenience init?(url: URL?, flags: Int32, vfs: String?) {
        self.init(path: url?.path, flags: flags, vfs: vfs)
    }

    /// The one designated initializer: sets up the queue without opening anything.
    init(uncheckedPath path: String?, flags: Int32, vfs: String?, configuration: FMDatabaseConfiguration) {
        self.path = path
        self.openFlags = flags
        self.vfsName = vfs
        self.logger = configuration.logger
        self.logsErrors = configuration.logsErrors
        self.dispatchQueue = DispatchQueue(label: "fmdb.\(UUID().uuidString)")
        self.keyProvider = configuration.keyProvider
        self.prepareDatabase = configuration.connectionSetUp
        self.busyTimeout = configuration.busyTimeout
        dispatchQueue.setSpecific(key: queueKey, value: ObjectIdentifier(self))
    }

    deinit {
        // The last reference is gone, so no block can be running: close without the queue.
        database?.closeAsOwner()
    }

    // MARK: - The queue

    /// Runs `body` on the serial queue, refusing re-entrant calls (they would deadlock).
    @discardableResult
    func onQueue<T>(_ body: () throws -> T) rethrows -> T {
        if DispatchQueue.getSpecific(key: queueKey) == ObjectIdentifier(self) {
            programmingError(
                "FMDatabaseQueue: a call was made from inside a block of the same queue, which would deadlock. "
                    + "Use the FMDatabase the block was given instead."
            )
        }
        return try dispatchQueue.sync {
            // However the work ends, the connection is not lent any more (see FMDatabase+Lending.swift).
            defer { database?.takeBack() }
            return try body()
        }
    }

    /// The open database, opening and keying it when needed. `checksKey`: whether an open keyed connection
    /// is checked against the file's key first (false only before a BEGIN that reads the header itself: see
    /// `withTransactionConnection`). Runs on the queue.
    func openDatabase(checksKey: Bool = true) throws -> FMDatabase {
        if let adopted = adoptedProvider.withLock({ state in
            defer { state = nil }; return state
        }) {
            // Another queue or pool of this process rekeyed the file: the connection keyed before is dropped.
            keyProvider = adopted
            closeDatabase()
        }
        if let database, database.isOpen {
            guard keyProvider != nil, checksKey, let failure = database.keyCheckFailureBeforeBlock() else {
                database.lend()
                return database
            }
            // The connection cannot read the file under its key any more (rekeyed elsewhere since the last
            // block, or unreadable): a new connection, with the provider asked again, serves this call (no
            // block ran on the old one, so none is run again).
            keyChanged(failure)
        }
        // Opened, keyed and set up; on failure closed, and what it created removed when the file was new.
        let open = { try self.openConnection(keyProvider: self.keyProvider) }
        let db: FMDatabase
        do {
            db = try open()
        } catch FMResultCode.notADatabase where keyProvider != nil {
            // The file is under a key the provider did not give (rekeyed elsewhere while the queue was
            // closed): the provider reads its source again, once.
            keyChanged(.anotherKey)
            db = try open()
        }
        database = db
        interruptTarget.withLock { $0 = db.interruptHandle }
        db.lend()
        return db
    }

    /// After a block: close result sets it left open, roll back a transaction it left open (as the pool
    /// does), each with a warning.
    private func tidy(_ db: FMDatabase) {
        db.cleanUpAfterBlock(owner: "FMDatabaseQueue")
        if keyProvider != nil, db.isOpen, let failure = db.keyCheckFailureAfterBlock() { keyChanged(failure) }
        db.takeBack()
    }

    /// Closes the connection; the next call opens a new one. Runs on the queue.
    func closeDatabase() {
        interruptTarget.withLock { $0 = nil }
        database?.closeAsOwner()
        database = nil
    }

    /// Runs a throwing block on `db`, telling a block stopped by a key change made elsewhere so.
    private func run<T>(_ db: FMDatabase, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as FMDatabaseError where FMDatabase.mayMeanKeyOrFileChanged(error.resultCode) {
            guard let failure = db.keyCheckFailure() else { throw error }
            throw FMDatabase.keyChangedError(path: path, cause: error, failure: failure)
        }
    }

    /// Runs a transaction of `kind` (`body` calls `markStarted` as its block starts) on the queue's
    /// connection. When its BEGIN met the file under a key the connection does not hold, its block has not
    /// run: the key changed elsewhere since the connection last read the file, or while BEGIN waited for
    /// the write lock (a rekey holds it throughout). The connection is closed as after any key change, and
    /// the transaction begins again on a new one keyed with the provider asked again (up to
    /// `FMDatabase.transactionAttemptsAcrossKeyChanges` BEGINs in all); its block still runs at most once.
    /// Runs on the queue.
    ///
    /// An immediate or exclusive BEGIN starts a read of the file at once, which reads the header page under
    /// the connection's key (SQLITE_NOTADB under another): it is its own key check, so the connection is
    /// not checked before it. A deferred BEGIN reads nothing, so its connection is checked first.
    func withTransactionConnection<T>(
        _ kind: FMDBTransactionKind, cancellation: BlockCancellation?,
        _ body: (FMDatabase, _ markStarted: () -> Void) throws -> T
    ) throws -> T {
        var started = false
        let attempts = FMDatabase.transactionAttemptsAcrossKeyChanges
        for attempt in 1...attempts {
            let db = try openDatabase(checksKey: kind == .deferred)
            defer { tidy(db) }
            do {
                return try db.withBeginAsKeyCheck(kind != .deferred) { try body(db) { started = true } }
            } catch let error as FMDatabaseError where FMDatabase.mayMeanKeyOrFileChanged(error.resultCode) {
                guard let failure = db.keyCheckFailure() else { throw error }
                // `tidy` closes the connection and asks the provider again.
                if started || attempt == attempts {
                    throw FMDatabase.keyChangedError(path: path, cause: error, failure: failure)
                }
            }
        }
        throw FMDatabaseError.misuse("unreachable: a transaction is tried a bounded number of times")
    }

    // MARK: - FMDB API

    /// Closes the database; the next call reopens (and re-keys) it.
    public func close() {
        onQueue {
            interruptTarget.withLock { $0 = nil }
            database?.closeAsOwner()
            database = nil
        }
    }

    /// Interrupts the statement running in the current block (callable from any thread).
    public func interrupt() {
        interruptTarget.withLock { $0?.interrupt() }
    }

    /// Runs `block` with the database, on the queue.
    public func inDatabase(_ block: (FMDatabase) -> Void) {
        onQueue {
            do {
                let db = try openDatabase()
                block(db)
                tidy(db)
            } catch {
                record(error)
            }
        }
    }

    /// Runs `block` in an exclusive transaction (as FMDB 2.7); `rollback.pointee = true` rolls it back.
    public func inTransaction(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) {
        inTransaction(kind: .exclusive, block)
    }

    /// Runs `block` in a deferred transaction.
    public func inDeferredTransaction(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) {
        inTransaction(kind: .deferred, block)
    }

    /// Runs `block` in an exclusive transaction.
    public func inExclusiveTransaction(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) {
        inTransaction(kind: .exclusive, block)
    }

    /// Runs `block` in an immediate transaction.
    public func inImmediateTransaction(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) {
        inTransaction(kind: .immediate, block)
    }

    private func inTransaction(kind: FMDBTransactionKind, _ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void)
    {
        onQueue {
            var started = false
            do {
                try withTransactionConnection(kind, cancellation: nil) { db, markStarted in
                    try db.runTransaction(kind: kind) { db, rollback in
                        started = true
                        markStarted()
                        block(db, rollback)
                    }
                }
            } catch {
                // After the block ran: its COMMIT failed, or SQLite rolled the transaction back.
                record(error, started ? "transaction failed" : "could not supply a database")
            }
        }
    }

    /// Runs `block` inside a savepoint on the queue; `rollback.pointee = true` rolls it back.
    @discardableResult
    public func inSavePoint(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) -> Error? {
        onQueue {
            do {
                let db = try openDatabase()
                defer { tidy(db) }
                return db.inSavePoint { rollback in block(db, rollback) }
            } catch {
                record(error, logs: false)
                return error
            }
        }
    }

    /// Checkpoints the WAL of every attached database.
    public func checkpoint(_ mode: FMDBCheckpointMode) throws {
        try checkpoint(mode, name: nil)
    }

    /// Checkpoints the WAL of `name` (nil: every attached database).
    public func checkpoint(_ mode: FMDBCheckpointMode, name: String?) throws {
        try onQueue {
            try openDatabase().checkpoint(mode, name: name, logFrameCount: nil, checkpointCount: nil)
        }
    }

    // MARK: - Swift-native API

    /// Runs `block` with the database on the queue and returns its result; nil when no database could
    /// be supplied (see `lastError`).
    @discardableResult
    public func inDatabase<T>(_ block: (FMDatabase) -> T) -> T? {
        onQueue {
            do {
                let db = try openDatabase()
                defer { tidy(db) }
                return block(db)
            } catch {
                record(error)
                return nil
            }
        }
    }

    @discardableResult
    @_disfavoredOverload
    public func inDatabase<T>(_ block: (FMDatabase) throws -> T) throws -> T {
        try onQueue { try withConnection(cancellation: nil, block) }
    }

    @discardableResult
    public func inTransaction<T>(_ kind: FMDBTransactionKind, _ block: (FMDatabase) throws -> T) throws -> T {
        try onQueue { try runTransaction(kind, block) }
    }

    @discardableResult
    public func perform<T: Sendable>(_ block: @escaping @Sendable (FMDatabase) throws -> T) async throws -> T {
        try await performBlock(block)
    }

    public func performTransaction<T: Sendable>(
        _ kind: FMDBTransactionKind = .exclusive, _ block: @escaping @Sendable (FMDatabase) throws -> T
    ) async throws -> T {
        try await performTransactionBlock(kind, block)
    }
}

extension FMDatabaseQueue: DatabaseWriterCore {
    func storeLastError(_ error: FMDatabaseError) {
        lastErrorBox.withLock { $0 = error }
    }

    /// On the queue's own thread, after the blocks called before (the caller's `QueuedCall` is resumed at
    /// once when its task is cancelled before then).
    func scheduleAsync(_ work: @escaping @Sendable () -> Void) {
        dispatchQueue.async(execute: work)
    }

    func wakeWaitersAfterCancellation() {}

    /// Runs on the queue.
    func withConnection<T>(cancellation: BlockCancellation?, _ body: (FMDatabase) throws -> T) throws -> T {
        let db = try openDatabase()
        defer { tidy(db) }
        return try run(db) { try body(db) }
    }
}
