import Foundation
import Logging

/// A pool of connections to one database, each used by one block at a time: FMDB's `FMDatabasePool`.
/// Readers run in parallel (use WAL); writers still take SQLite's write lock one at a time.
///
/// ```swift
/// let pool = try FMDatabasePool(path: path, keyProvider: PBKDF2KeyProvider(passphrase: "secret"))
/// pool.maximumNumberOfDatabasesToCreate = 4
/// pool.inDatabase { db in
///     let count = db.int(forQuery: "SELECT count(*) FROM t")
/// }
/// ```
///
/// When every allowed connection is checked out, a call waits (no timeout) until one is checked in.
/// A call that could only be served by a connection its own thread holds (a nested call at the limit)
/// is a programming error, reported with a precondition failure instead of a deadlock.
///
/// Transactions (`inTransaction`, `inDeferredTransaction`, `inExclusiveTransaction`,
/// `inImmediateTransaction`, `inSavePoint`, `inTransaction(_:_:)`, `performTransaction`) queue first-come,
/// first-served per database file, shared by every pool on that file in this process, before they take a
/// connection: SQLite's busy handler is not fair, and pool writers waiting in it could starve each other
/// past the busy timeout. `SQLITE_BUSY` then only comes from another process, from writes outside a pool
/// transaction, or from `transactionQueueTimeout` when set. Deferred transactions queue too: one that
/// reads and then writes could otherwise fail to upgrade its lock (in WAL mode at once, without waiting).
/// Read in `inDatabase` to read in parallel. A pool transaction started inside another on the same thread
/// fails with `SQLITE_MISUSE` (it would wait for itself).
///
/// Sendable: safe to share between threads and tasks.
///
/// - Note: FMDB compatibility: FMDB hands `nil` to a non-optional block when its limit is hit or a
///   connection cannot be opened; here the call waits for a connection, and when none can be opened
///   (or the delegate refuses it) the block is not called, the error is logged and kept in
///   `lastError`, and the throwing variants throw it.
public final class FMDatabasePool: @unchecked Sendable {
    // @unchecked Sendable. Lock invariant: every mutable stored property below (`state`, `delegateStorage`,
    // `queueTimeout`) is read and written only while `condition` is locked; the connections themselves are
    // counted and handed out by `connections` (its own lock, taken inside this one, never around it). A
    // checked-out FMDatabase is used only by the thread that checked it out; idle ones only through `connections`.

    /// An idle connection, and whether the delegate was told about it (`didAddDatabase`): not yet for the one a
    /// keyed init opens, before any delegate can be set, nor for one a rekey or a new key provider opened. It is
    /// told at the connection's next checkout.
    struct PooledConnection {
        let database: FMDatabase
        let announced: Bool
    }

    typealias Lease = BoundedPool<PooledConnection>.Lease

    /// The write-affinity policy's one value (see `takeIdle`).
    struct WriterAffinity {
        /// The connection the pool's last transaction or savepoint (the blocks that take turns at the write
        /// gate) ran on: the next one prefers it, and other blocks prefer any other idle connection. nil: none,
        /// or it is gone (weak: a freed connection is never mistaken for a new one).
        weak var writer: FMDatabase?
    }

    struct State {
        var keyProvider: (any KeyProvider)?
        /// A rekey is waiting for the connections or running: a `replaceKeyProvider` waits for it.
        var rekeying = false
        /// A `replaceKeyProvider` is checking its provider: a rekey waits for it (and it for a rekey).
        var replacingKey = false
        /// Bumped each time the file's key changes through this process (a rekey, here or through another
        /// queue or pool of the file): a `replaceKeyProvider` that checked its provider before checks again.
        var keyEpoch = 0
        var lastError: FMDatabaseError?
    }

    /// The path given at init (nil: in-memory).
    public let path: String?
    /// `path` as a log line or an error shows it (a `file:` URI without its query, which may hold a key).
    var shownPath: String { SQLRedaction.loggablePath(path ?? ":memory:") }
    /// The `sqlite3_open_v2` flags given at init.
    public let openFlags: Int32
    /// The VFS name given at init.
    public let vfsName: String?
    /// Where the pool and its connections log (each connection's `FMDatabase/logger`).
    public let logger: Logger
    /// Whether the pool logs the errors its FMDB forms meet and do not throw, and each connection's
    /// starting `FMDatabase/logsErrors`. Errors a throwing form throws, or `inSavePoint` returns, are never
    /// logged: the caller has them. True unless the initializer was given false.
    ///
    /// ```swift
    /// let pool = try FMDatabasePool(path: path, keyProvider: provider, logsErrors: false)
    /// ```
    public let logsErrors: Bool

    let condition = NSCondition()
    var state = State()
    /// The connections: idle ones, the count checked out and being opened, the limit, the waits for it, a
    /// rekey's pause and the generation (Core/BoundedPool.swift). Its statistics are the pool's.
    let connections = BoundedPool<PooledConnection>()
    let statisticsCounters = StatisticsCounters()  // Key checks and changes (FMDatabaseStatistics.swift).
    /// The writer affinity `takeIdle` applies (under `connections`' lock), `openNew` and key changes set: a leaf
    /// lock, taken inside either lock and around none.
    let affinity = Protected(WriterAffinity())
    /// The path under which the pool is in the process-wide ``KeyChangeRegistry`` (nil: not keyed, or in
    /// memory); written only by the keyed initializer.
    var keyPath: String?
    /// The file's first-come, first-served queue for transactions, shared by every pool on the file in
    /// this process (Core/WriteGate.swift); immutable, Sendable.
    private let writeGate: WriteGate
    private var queueTimeout: TimeInterval?
    private weak var delegateStorage: (any FMDatabasePoolDelegate)?
    /// Runs on every new connection after keying, before any block gets it (immutable).
    private let prepareDatabase: (@Sendable (FMDatabase) throws -> Void)?

    // MARK: - Initializers

    /// An in-memory database (see ``init(path:flags:vfs:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.init(
            path: nil, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil, logger: logger,
            logsErrors: logsErrors, prepareDatabase: prepareDatabase)
    }

    /// A database at `path`, read-write, created if needed (see
    /// ``init(path:flags:vfs:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        path: String?, logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.init(
            path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil, logger: logger,
            logsErrors: logsErrors, prepareDatabase: prepareDatabase)
    }

    /// A database at a file URL, read-write, created if needed (see
    /// ``init(path:flags:vfs:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        url: URL?, logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.init(
            path: url?.path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil, logger: logger,
            logsErrors: logsErrors, prepareDatabase: prepareDatabase)
    }

    /// A database at `path`, opened with `flags` (see ``init(path:flags:vfs:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        path: String?, flags: Int32, logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.init(
            path: path, flags: flags, vfs: nil, logger: logger, logsErrors: logsErrors, prepareDatabase: prepareDatabase
        )
    }

    /// A database at a file URL, opened with `flags` (see ``init(path:flags:vfs:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        url: URL?, flags: Int32, logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.init(
            path: url?.path, flags: flags, vfs: nil, logger: logger, logsErrors: logsErrors,
            prepareDatabase: prepareDatabase)
    }

    /// A pool that opens connections lazily, when blocks need them.
    ///
    /// ```swift
    /// let pool = FMDatabasePool(path: path, flags: SQLITE_OPEN_READWRITE, vfs: nil, logger: Logger(label: "store"),
    ///                           logsErrors: false) { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values:
    /// nil) }
    /// ```
    ///
    /// - Parameters:
    ///   - path: The database file; nil for an in-memory database.
    ///   - flags: `sqlite3_open_v2` flags.
    ///   - vfs: The VFS name, or nil for the default.
    ///   - logger: Where the pool and its connections log (default: label "fmdb", as FMDB).
    ///   - logsErrors: Whether the FMDB forms log the errors they do not throw (``logsErrors``).
    ///   - prepareDatabase: Sets up each new connection before any block gets it; nil sets up nothing. When
    ///     it throws, the connection is closed and not used, and the call that needed it gets the error. It
    ///     runs on the thread that opens the connection, outside the pool's lock; it must not call the pool.
    /// - Note: FMDB compatibility: `logger`, `logsErrors` and `prepareDatabase` are Swift-native additions;
    ///   their defaults behave as FMDB.
    public init(
        path: String?, flags: Int32, vfs: String?, logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.path = path
        self.openFlags = flags
        self.vfsName = vfs
        self.logger = logger
        self.logsErrors = logsErrors
        self.writeGate = WriteGate.shared(forPath: path)
        self.prepareDatabase = prepareDatabase
    }

    /// A database at a file URL, opened with `flags` and a VFS (see
    /// ``init(path:flags:vfs:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        url: URL?, flags: Int32, vfs: String?, logger: Logger = Logger(label: "fmdb"), logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.init(
            path: url?.path, flags: flags, vfs: vfs, logger: logger, logsErrors: logsErrors,
            prepareDatabase: prepareDatabase)
    }

    /// A keyed pool: opens, keys and verifies one connection at init (kept checked in for use), and
    /// keys every later connection when it opens it.
    /// - Throws: `FMDatabaseError`: code 26 for a wrong key, the open error otherwise.
    public convenience init(
        path: String?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        keyProvider: any KeyProvider
    ) throws {
        try self.init(path: path, flags: flags, vfs: vfs, keyProvider: keyProvider, prepareDatabase: nil)
    }

    /// A keyed pool whose every connection is set up by `prepareDatabase` before any block gets it, and
    /// logs to `logger`.
    ///
    /// `prepareDatabase` runs once on each new connection, after it is keyed and verified: on the one
    /// this initializer opens, on each one the pool opens later, and on one a rekey had to reopen. Put
    /// per-connection settings there (`PRAGMA foreign_keys`, custom functions, `busy_timeout`): unlike a
    /// delegate set after init, it cannot miss a connection. When it throws, the connection is closed
    /// and not used, and the caller gets the error (this initializer, or the call that needed the
    /// connection). It runs on the thread that opens the connection, outside the pool's lock; it must not
    /// call the pool.
    ///
    /// ```swift
    /// let pool = try FMDatabasePool(path: path, keyProvider: provider) { db in
    ///     try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
    /// }
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/foreignkeys.html#fk_enable>
    ///
    /// - Parameters:
    ///   - path: The database file; nil for an in-memory database.
    ///   - flags: `sqlite3_open_v2` flags.
    ///   - vfs: The VFS name, or nil for the default.
    ///   - keyProvider: Supplies the key of every connection.
    ///   - logger: Where the pool and its connections log.
    ///   - logsErrors: Whether the FMDB forms log the errors they do not throw (``logsErrors``).
    ///   - prepareDatabase: Sets up each new connection; nil sets up nothing.
    /// - Throws: `FMDatabaseError`: code 26 for a wrong key, the open error, or what `prepareDatabase` threw.
    /// - Note: FMDB compatibility: a Swift-native addition (GRDB's `Configuration.prepareDatabase`). FMDB's
    ///   `databasePool(_:didAddDatabase:)` is also told about every connection here, including the one
    ///   this initializer opened, at its first checkout.
    public init(
        path: String?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        keyProvider: any KeyProvider,
        logger: Logger = Logger(label: "fmdb"),
        logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) throws {
        self.path = path
        self.openFlags = flags
        self.vfsName = vfs
        self.logger = logger
        self.logsErrors = logsErrors
        self.writeGate = WriteGate.shared(forPath: path)
        self.prepareDatabase = prepareDatabase
        state.keyProvider = keyProvider
        let first = try openConnection(keyProvider: keyProvider)
        connections.add(PooledConnection(database: first, announced: false))
        keyPath = KeyChangeRegistry.registeredPath(path)
        KeyChangeRegistry.shared.register(self, path: keyPath)
    }

    /// The keyed initializer, for a file URL (see
    /// ``init(path:flags:vfs:keyProvider:logger:logsErrors:prepareDatabase:)``).
    public convenience init(
        url: URL?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        keyProvider: any KeyProvider,
        logger: Logger = Logger(label: "fmdb"),
        logsErrors: Bool = true,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) throws {
        try self.init(
            path: url?.path, flags: flags, vfs: vfs, keyProvider: keyProvider, logger: logger, logsErrors: logsErrors,
            prepareDatabase: prepareDatabase)
    }

    deinit {
        for entry in connections.newGeneration() { entry.database.closeAsOwner() }
    }

    // MARK: - Properties

    /// Asked before each connection is handed out, told when one joins (weak).
    public weak var delegate: (any FMDatabasePoolDelegate)? {
        get { locked { delegateStorage } }
        set { locked { delegateStorage = newValue } }
    }

    /// The most connections the pool opens at once; 0 (the default) means no limit.
    public var maximumNumberOfDatabasesToCreate: Int {
        get { connections.limit }
        set { connections.limit = newValue }
    }

    /// How long a transaction waits for its turn behind this file's earlier pool transactions in this
    /// process; nil (the default), infinity and anything from 10^9 s up wait as long as it takes; 0, NaN
    /// and negatives do not wait. When it runs out, the transaction does not
    /// start: the throwing forms throw `SQLITE_BUSY`, the FMDB forms skip the block and set `lastError`.
    ///
    /// ```swift
    /// pool.transactionQueueTimeout = 10
    /// ```
    /// - Note: FMDB compatibility: FMDB has no such queue; its transactions waited in SQLite's busy handler
    ///   (`maxBusyRetryTimeInterval`), which still applies to locks held by other processes.
    public var transactionQueueTimeout: TimeInterval? {
        get { locked { queueTimeout } }
        set { locked { queueTimeout = newValue } }
    }

    /// Connections idle in the pool.
    public var countOfCheckedInDatabases: Int { connections.statistics.idle }
    /// Connections in use by blocks now.
    public var countOfCheckedOutDatabases: Int { connections.statistics.checkedOut }
    /// All open connections of the pool.
    ///
    /// - Note: FMDB compatibility: a keyed pool opens, keys and verifies one connection at init, so
    ///   this starts at 1.
    public var countOfOpenDatabases: Int {
        let now = connections.statistics
        return now.idle + now.checkedOut
    }

    /// The last error met while supplying a database to a block, or nil.
    public var lastError: Error? { locked { state.lastError } }

    /// Closes every checked-in connection; checked-out ones are closed when they are checked in.
    public func releaseAllDatabases() {
        for entry in connections.newGeneration() { entry.database.closeAsOwner() }
    }

    // MARK: - Checkout

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }

    /// Opens, keys and sets up (`prepareDatabase`) a new connection; closes it when any step fails, and
    /// removes the files it created when the database did not exist.
    func openConnection(keyProvider: (any KeyProvider)?) throws -> FMDatabase {
        try FMDatabase.openShared(
            path: path, flags: openFlags, vfs: vfsName, keyProvider: keyProvider, logger: logger,
            logsErrors: logsErrors,
            prepare: { try self.prepareDatabase?($0) })
    }

    /// Runs `prepareDatabase` on a connection new to the pool; closes it when that throws.
    private func prepare(_ db: FMDatabase) throws {
        guard let prepareDatabase else { return }
        do {
            try prepareDatabase(db)
        } catch {
            db.closeAsOwner()
            throw error
        }
    }

    /// Keeps an error for `lastError` (not logged: see `logUnthrown`).
    @discardableResult
    private func record(_ error: Error) -> FMDatabaseError {
        let value = (error as? FMDatabaseError) ?? FMDatabaseError(code: SQLITE_ERROR, message: "\(error)")
        locked { state.lastError = value }
        return value
    }

    /// Logs an error an FMDB form met and could not hand to its caller, when `logsErrors`.
    private func logUnthrown(_ error: Error, _ what: String = "could not supply a database") {
        guard logsErrors else { return }
        let message = (error as? FMDatabaseError)?.message ?? "\(error)"
        logger.error("FMDatabasePool \(what) for \(shownPath): \(message)")
    }

    /// Checks a connection out for the calling thread, waiting while the limit is reached or a rekey runs:
    /// an idle connection (checked against the file's key first when `checksKey`), or a new one. `checksKey`
    /// is false only before a BEGIN that reads the header itself (see `withTransactionDatabase`). `forWrite`:
    /// for a transaction or savepoint, which runs in its turn at the file's write gate (see `takeIdle`).
    /// `cancellation`: the task of a `perform` call; once it is cancelled the wait ends with
    /// `CancellationError` (its `onCancel` wakes the waiters).
    private func checkOut(
        checksKey: Bool, forWrite: Bool = false, cancellation: BlockCancellation? = nil
    ) throws -> Lease {
        // Cancellation is tested under the connections' lock, which `wakeCancelledWaiters` takes before it
        // wakes them: a cancellation that lands after the test finds this call waiting, and wakes it. Tested
        // first: a call cancelled before it got a connection neither takes one nor opens one (a key
        // derivation) only to throw.
        let checkout = try connections.checkOut(
            isCancelled: { cancellation?.isCancelled == true },
            take: { takeIdle(from: &$0, forWrite: forWrite) },
            onDeadlock: { limit in
                programmingError(
                    "FMDatabasePool: every connection (maximumNumberOfDatabasesToCreate = \(limit)) is held by this "
                        + "thread, in an enclosing pool block: this nested call could never be served. Raise the "
                        + "limit, or use the database of the enclosing block."
                )
            })
        let delegate = locked { delegateStorage }
        let lease: Lease
        switch checkout {
        case .idle(let idle): lease = try admit(idle, checksKey: checksKey, forWrite: forWrite, delegate: delegate)
        case .create(let permit): lease = try openNew(with: permit, forWrite: forWrite, delegate: delegate)
        }
        let db = lease.element.database
        db.keyCheckCounters = statisticsCounters
        db.checkedOut = true
        if !lease.element.announced { delegate?.databasePool(self, didAddDatabase: db) }
        return lease
    }

    /// An idle connection for a block: when it cannot read the file under its key any more, a new connection
    /// takes its place.
    private func admit(
        _ lease: Lease, checksKey: Bool, forWrite: Bool, delegate: (any FMDatabasePoolDelegate)?
    ) throws -> Lease {
        let db = lease.element.database
        db.keyCheckCounters = statisticsCounters  // Before its first check (the init's connection).
        if checksKey, locked({ state.keyProvider != nil }), let failure = db.keyCheckFailureBeforeBlock() {
            // This connection cannot read the file under its key any more (rekeyed elsewhere since it last
            // read it, or unreadable): it is dropped whatever code SQLCipher reports on it, and a new connection
            // takes its place (its permit, without waiting again). Under another key, every idle one, keyed as
            // it was, is dropped too and the provider reads its source again. No block has run on it, so none
            // is run again.
            db.closeAsOwner()
            let permit = connections.exchange(lease)
            keyChanged(failure)
            return try openNew(with: permit, forWrite: forWrite, delegate: delegate)
        }
        db.lend()
        do {
            try offer(db, to: delegate)
        } catch {
            db.closeAsOwner()
            connections.checkIn(lease, .discard)
            throw error
        }
        return lease
    }

    /// Opens a connection with the permit to create one, and offers it to the delegate; gives the permit back
    /// when either fails.
    private func openNew(
        with permit: BoundedPool<PooledConnection>.Permit, forWrite: Bool, delegate: (any FMDatabasePoolDelegate)?
    ) throws -> Lease {
        let (db, generation): (FMDatabase, Int)
        do {
            (db, generation) = try openWithCurrentKey()
            db.lend()
            do {
                try offer(db, to: delegate)
            } catch {
                db.closeAsOwner()
                throw error
            }
        } catch {
            connections.abandon(permit)
            throw error
        }
        let lease = connections.lease(
            PooledConnection(database: db, announced: false), with: permit, generation: generation)
        if forWrite { affinity.withLock { $0.writer = db } }
        return lease
    }

    /// Opens a connection with the pool's key provider, and returns it with the generation read with that
    /// provider (a key change since makes it dropped at check-in). When the file is under a key the provider
    /// did not give (rekeyed elsewhere, seen here before any idle connection met it), the provider reads its
    /// source again, once.
    private func openWithCurrentKey() throws -> (FMDatabase, generation: Int) {
        var (generation, provider) = locked { (connections.generation, state.keyProvider) }
        do {
            return (try openConnection(keyProvider: provider), generation)
        } catch let error as FMDatabaseError where error.resultCode == SQLITE_NOTADB && provider != nil {
            keyChanged(.anotherKey)
            (generation, provider) = locked { (connections.generation, state.keyProvider) }
            return (try openConnection(keyProvider: provider), generation)
        }
    }

    /// Asks the delegate whether a connection may serve a block (FMDB's `shouldAddDatabaseToPool`).
    private func offer(_ db: FMDatabase, to delegate: (any FMDatabasePoolDelegate)?) throws {
        if let delegate, !delegate.databasePool(self, shouldAddDatabaseToPool: db) {
            throw FMDatabaseError.misuse(
                "The pool's delegate refused the connection (shouldAddDatabaseToPool returned false).")
        }
    }

    /// Takes an idle connection out of `idle`: the most recently checked in (as FMDB), except that a
    /// transaction or savepoint (the blocks that take turns at the write gate, one at a time) takes the
    /// connection the last one ran on, and any other block an idle connection other than that one. Runs under
    /// the connections' lock (the pool's policy for `BoundedPool.checkOut`).
    ///
    /// Why: a write on one connection makes every other connection of the file drop its page cache at its
    /// next transaction (SQLite sees the WAL changed), and on a keyed file each page read again is
    /// authenticated and decrypted. Writes that keep to one connection find their pages in its cache, as a
    /// single writer connection's do (GRDB's pool, raw C services); measured in BENCHMARKS.md, W6.
    private func takeIdle(from idle: inout [PooledConnection], forWrite: Bool) -> PooledConnection? {
        affinity.withLock { affinity in
            let count = idle.count
            if count > 1, let writer = affinity.writer,
                let index = idle.lastIndex(where: { $0.database === writer })
            {
                if forWrite {
                    return idle.remove(at: index)
                }
                if index == count - 1 { return idle.remove(at: count - 2) }
            }
            guard let entry = idle.popLast() else { return nil }
            if forWrite { affinity.writer = entry.database }
            return entry
        }
    }

    /// Checks a connection back in: closes result sets and rolls back a transaction the block left
    /// open; closes it instead when the pool moved to a new generation (rekey, release).
    private func checkIn(_ lease: Lease) {
        let db = lease.element.database
        db.checkedOut = false
        db.cleanUpAfterBlock(owner: "FMDatabasePool")
        if db.isOpen, locked({ state.keyProvider != nil }), let failure = db.keyCheckFailureAfterBlock() {
            db.closeAsOwner()
            keyChanged(failure)
        }
        db.takeBack()
        let kept = connections.checkIn(
            lease, db.isOpen ? .reuse(PooledConnection(database: db, announced: true)) : .discard)
        if !kept, db.isOpen { db.closeAsOwner() }
    }

    /// Wakes the calls waiting for a connection or for their turn, so a cancelled one stops waiting (see
    /// `checkOut`).
    private func wakeCancelledWaiters() {
        connections.wakeWaiters()
        writeGate.wakeWaiters()
    }

    /// Runs `body` in this transaction's turn at the file's write gate (Core/WriteGate.swift).
    private func inTurn<T>(cancellation: BlockCancellation? = nil, _ body: () throws -> T) throws -> T {
        try writeGate.withTurn(timeout: transactionQueueTimeout, cancellation: cancellation, body)
    }

    /// Thrown out of `withDatabase` when a transaction's BEGIN met the file under a key its connection does
    /// not hold, before its block started: `withTransactionDatabase` runs the transaction again.
    private struct KeyChangedBeforeBlock: Error {
        let cause: FMDatabaseError
        let failure: KeyCheckFailure
    }

    /// `blockStarted`: for a transaction, whether its block has started; `checksKey`: whether an idle
    /// connection's key is checked before `body` (see `withTransactionDatabase`).
    private func withDatabase<T>(
        blockStarted: (() -> Bool)? = nil, checksKey: Bool = true, forWrite: Bool = false,
        cancellation: BlockCancellation? = nil, _ body: (FMDatabase) throws -> T
    ) throws -> T {
        let lease: Lease
        do {
            lease = try checkOut(checksKey: checksKey, forWrite: forWrite, cancellation: cancellation)
        } catch is CancellationError {
            throw CancellationError()  // The caller's own doing: not the pool's lastError.
        } catch {
            record(error)
            throw error  // As thrown: what `prepareDatabase` threw reaches the caller unwrapped.
        }
        defer { checkIn(lease) }
        let db = lease.element.database
        do {
            return try body(db)
        } catch let error as FMDatabaseError where FMDatabase.mayMeanKeyOrFileChanged(error.resultCode) {
            guard let failure = db.keyCheckFailure() else { throw error }
            // Checked in after this: `checkIn` finds the same, closes it and re-asks the provider.
            if let blockStarted, !blockStarted() { throw KeyChangedBeforeBlock(cause: error, failure: failure) }
            throw FMDatabase.keyChangedError(path: path, cause: error, failure: failure)
        }
    }

    /// Runs a transaction of `kind` (`body` calls `markStarted` as its block starts) on a connection. When
    /// its BEGIN met the file under a key the connection does not hold, its block has not run: the key
    /// changed elsewhere since the connection last read the file, or while BEGIN waited for the write lock
    /// (a rekey holds it throughout). The connection is dropped as after any key change, and the
    /// transaction begins again, on a new connection keyed with the provider asked again (up to
    /// `FMDatabase.transactionAttemptsAcrossKeyChanges` BEGINs in all: an idle connection under an old key
    /// uses one, each key change while BEGIN waits another); its block still runs at most once.
    ///
    /// An immediate or exclusive BEGIN starts a read of the file at once, which reads the header page under
    /// the connection's key (SQLITE_NOTADB under another): it is its own key check, so the connection is
    /// not checked before it (one read transaction fewer per write). A deferred BEGIN reads nothing; the
    /// block's first statement would be the first to meet another key, so its connection is checked first.
    private func withTransactionDatabase<T>(
        _ kind: FMDBTransactionKind, cancellation: BlockCancellation? = nil,
        _ body: (FMDatabase, _ markStarted: () -> Void) throws -> T
    ) throws -> T {
        var started = false
        let checksKey = kind == .deferred
        let attempts = FMDatabase.transactionAttemptsAcrossKeyChanges
        for attempt in 1...attempts {
            do {
                return try withDatabase(
                    blockStarted: { started }, checksKey: checksKey, forWrite: true, cancellation: cancellation
                ) { db in
                    try db.withBeginAsKeyCheck(!checksKey) { try body(db) { started = true } }
                }
            } catch let again as KeyChangedBeforeBlock {
                // Checked in: the connection was closed and the provider asked again. Once more, a bounded
                // number of times.
                if attempt == attempts {
                    throw FMDatabase.keyChangedError(path: path, cause: again.cause, failure: again.failure)
                }
            }
        }
        throw FMDatabaseError.misuse("unreachable: a transaction is tried a bounded number of times")
    }

    // MARK: - FMDB API

    /// Runs `block` with a connection of the pool (calls may nest: each gets its own connection).
    public func inDatabase(_ block: (FMDatabase) -> Void) {
        do {
            try withDatabase { block($0) }
        } catch {
            logUnthrown(error)
        }
    }

    /// Runs `block` in an exclusive transaction (as FMDB 2.7); `rollback.pointee = true` rolls it back.
    ///
    /// Queues behind the file's earlier transactions (see the type's documentation). When the transaction
    /// cannot start (no connection, `SQLITE_BUSY` from another process), the block is **not called**: the
    /// error is logged and kept in `lastError`. Code that must know uses the throwing form:
    ///
    /// ```swift
    /// do {
    ///     try pool.inTransaction(.exclusive) { db in try db.executeUpdate("INSERT INTO t VALUES (?)", values: [1]) }
    /// } catch {
    ///     // The transaction did not run, or rolled back.
    /// }
    /// ```
    /// - Note: FMDB compatibility: FMDB also skips the block when BEGIN fails, and only logs it.
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
        do {
            try inTurn {
                do {
                    try withTransactionDatabase(kind) { db, markStarted in
                        var started = false
                        do {
                            try db.runTransaction(kind: kind) { db, rollback in
                                started = true
                                markStarted()
                                block(db, rollback)
                            }
                        } catch let error as FMDatabaseError
                            where !started && FMDatabase.mayMeanAnotherKey(error.resultCode)
                        {
                            throw error  // BEGIN may have met another key: withTransactionDatabase checks.
                        } catch {
                            record(error)
                            logUnthrown(error, "transaction failed")
                        }
                    }
                } catch {
                    record(error)
                    logUnthrown(error)
                }
            }
        } catch {
            record(error)  // The gate refused: a nested transaction, or transactionQueueTimeout ran out.
            logUnthrown(error, "could not start a transaction")
        }
    }

    /// Runs `block` inside a savepoint on one connection; `rollback.pointee = true` rolls it back.
    @discardableResult
    public func inSavePoint(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) -> Error? {
        do {
            return try inTurn {
                try withDatabase(forWrite: true) { db in db.inSavePoint { rollback in block(db, rollback) } }
            }
        } catch {
            record(error)
            return error
        }
    }

    /// Changes the key of the database and of every connection of the pool: waits until every
    /// connection is checked in (new checkouts wait meanwhile), rekeys on one connection outside any
    /// transaction with a busy timeout, verifies the new key on a fresh connection, checkpoints the
    /// WAL (TRUNCATE), and closes every other connection so later ones open with the new key. The pool
    /// switches to the new provider from the moment the key changed, even when only the checkpoint is
    /// pending (`.checkpointPending`).
    ///
    /// ```swift
    /// let outcome = try pool.rekey(using: newProvider)
    /// ```
    /// The busy timeout is at least 5 seconds (or the connections' `maxBusyRetryTimeInterval` when
    /// longer); ``rekey(using:busyTimeout:)-6dsx1`` sets it.
    /// - Returns: `.done`, or `.checkpointPending` (the key did change).
    /// - Throws: when the rekey did not take; the database then still opens with the old key, and the pool
    ///   keeps using it.
    @discardableResult
    public func rekey(using provider: any KeyProvider) throws -> FMRekeyOutcome {
        try rekey(using: provider, busyTimeout: nil)
    }

    /// ``rekey(using:)-4q591`` with the busy timeout given: how long the rekey and then its WAL checkpoint each
    /// wait for other connections' locks (other processes', and connections outside this pool). NaN,
    /// zero and negatives do not wait; infinity is SQLite's longest, about 24.8 days, for which the pool's
    /// checkouts wait too. The check of which key opens the file afterwards still waits at least 1 second
    /// per attempt.
    ///
    /// ```swift
    /// let outcome = try pool.rekey(using: newProvider, busyTimeout: 30)
    /// ```
    /// - Returns: `.done`, or `.checkpointPending` (the key did change).
    /// - Throws: when the rekey did not take; the database then still opens with the old key, and the pool
    ///   keeps using it.
    @discardableResult
    public func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval) throws -> FMRekeyOutcome {
        try rekey(using: provider, busyTimeout: Optional(busyTimeout))
    }

    private func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval?) throws -> FMRekeyOutcome {
        try provider.checkRekeySettings(against: locked { state.keyProvider })
        if connections.isHeldByCurrentThread {
            programmingError(
                "FMDatabasePool.rekey was called from inside a pool block: it waits for every connection to be checked "
                    + "in, so it would deadlock."
            )
        }
        // Once no other key change runs and every connection is checked in: checkouts then wait until the
        // rekey is done. Until then a `replaceKeyProvider` may go first (one a block calls must not wait for it).
        var pooled: [PooledConnection]?
        while pooled == nil {
            pooled = locked {
                while state.rekeying || state.replacingKey { condition.wait() }
                guard let idle = connections.pauseIfDrained() else { return nil }
                state.rekeying = true
                return idle
            }
            if pooled == nil { connections.waitUntilDrained() }
        }
        let wasUnannounced = pooled?.first.map { !$0.announced } ?? false
        let idle = (pooled ?? []).map(\.database)
        var resumed = false
        defer {
            if !resumed { connections.resume() }
            locked { state.rekeying = false }
            condition.broadcast()
        }
        let oldProvider = locked { state.keyProvider }
        // A rekey changes the key, never the settings the file was written with (a plaintext header, its salt,
        // the algorithms): the new provider keeps those of the provider it replaces (checked above).
        let provider = provider.keepingFileSettings(of: oldProvider)
        for db in idle.dropFirst() { db.closeAsOwner() }
        let db: FMDatabase
        var announced = false
        // Not a connection to a file no longer at the path (replaced since it opened): the rekey is for the
        // file at the path.
        if let first = idle.first, first.isOpen, !first.mainFileHasMoved() {
            db = first
            announced = !wasUnannounced
        } else {
            idle.first?.closeAsOwner()
            db = try openConnection(keyProvider: oldProvider)
        }
        db.lend()
        let connectionBefore = db.connection.map(ObjectIdentifier.init)
        let outcome: FMRekeyOutcome
        do {
            outcome = try db.rekeySafely(using: provider, busyTimeout: busyTimeout ?? db.sharedRekeyBusyTimeout)
        } catch {
            db.closeAsOwner()
            throw record(error)
        }
        // The rekey may have reopened the connection (a new SQLite handle): what `prepareDatabase` and the
        // delegate set on the old one is gone, so the new one is set up and announced again. When that
        // fails, the key did change: the connection is dropped, and the next checkout opens a new one.
        if db.isOpen, db.connection.map(ObjectIdentifier.init) != connectionBefore {
            announced = false
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
        }
        let rekeyed = db.rekeyedFileIdentity(path: keyPath)
        db.takeBack()  // Before it is back in `checkedIn`, where another thread may check it out.
        locked {
            state.keyProvider = provider
            state.keyEpoch += 1
            connections.resume(
                newGeneration: true, idle: db.isOpen ? [PooledConnection(database: db, announced: announced)] : [])
        }
        resumed = true
        KeyChangeRegistry.shared.announce(provider, rekeyed: rekeyed, from: self)
        return outcome
    }

    // MARK: - Swift-native API

    /// Runs `block` with a connection and returns its result; nil when none could be supplied.
    @discardableResult
    public func inDatabase<T>(_ block: (FMDatabase) -> T) -> T? {
        do {
            return try withDatabase(block)
        } catch {
            logUnthrown(error)
            return nil
        }
    }

    /// Runs a throwing `block` with a connection and returns its result.
    @discardableResult
    @_disfavoredOverload
    public func inDatabase<T>(_ block: (FMDatabase) throws -> T) throws -> T {
        try withDatabase(block)
    }

    /// Runs `block` in a transaction: commits when it returns, rolls back when it throws. Queues behind the
    /// file's earlier transactions in this process (first come, first served), then takes a connection.
    ///
    /// ```swift
    /// let id = try pool.inTransaction(.immediate) { db in
    ///     try db.executeUpdate("INSERT INTO t (v) VALUES (?)", values: ["x"])
    ///     return db.lastInsertRowId
    /// }
    /// ```
    /// - Throws: the error that kept the transaction from starting (`SQLITE_BUSY` from another process, no
    ///   connection, `SQLITE_MISUSE` for a pool transaction nested on the same thread), BEGIN's or COMMIT's
    ///   error, or what `block` throws (after rolling back).
    @discardableResult
    public func inTransaction<T>(_ kind: FMDBTransactionKind, _ block: (FMDatabase) throws -> T) throws -> T {
        try inTurn {
            try withTransactionDatabase(kind) { db, markStarted in
                try db.inTransaction(kind) { db in
                    markStarted()
                    return try block(db)
                }
            }
        }
    }

    /// Runs `block` with a connection without blocking the calling task (the wait for a connection and
    /// the work happen on a Dispatch thread).
    ///
    /// ```swift
    /// let count = try await pool.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
    /// ```
    ///
    /// Cancelling the task interrupts the statement the block is running (`sqlite3_interrupt`), and every
    /// statement the block starts afterwards (SQLite's progress handler, asked every 1,000 steps): they fail
    /// with `SQLITE_INTERRUPT`, and the call throws `CancellationError` once the block has returned (whatever
    /// it returned or threw). A call cancelled while it waits for a connection (the pool at
    /// ``maximumNumberOfDatabasesToCreate``) stops waiting and throws `CancellationError` at once, without
    /// running the block. What
    /// the block wrote before the interrupt stays written: use ``performTransaction(_:_:)`` to undo it. The
    /// connection goes back to the pool, usable.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/interrupt.html>
    ///
    /// - Throws: `CancellationError` when the task was cancelled, the block's error, or the error met
    ///   supplying a connection.
    @discardableResult
    public func perform<T: Sendable>(_ block: @escaping @Sendable (FMDatabase) throws -> T) async throws -> T {
        let cancellation = BlockCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    // The connection is checked in before the task resumes.
                    let result = Result {
                        try self.withDatabase(cancellation: cancellation) { db in
                            try cancellation.run(on: db) { try block(db) }
                        }
                    }
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            cancellation.cancel()
            self.wakeCancelledWaiters()
        }
    }

    /// `inTransaction(_:_:)` without blocking the calling task.
    ///
    /// ```swift
    /// try await pool.performTransaction(.immediate) { db in
    ///     try db.executeUpdate("INSERT INTO t VALUES (?)", values: [1])
    /// }
    /// ```
    ///
    /// Cancelling the task interrupts the statement the block is running (`sqlite3_interrupt`) and every
    /// statement it starts afterwards (SQLite's progress handler, asked every 1,000 steps), rolls the
    /// transaction back, and throws `CancellationError`; a cancellation that comes after the block returned
    /// and before COMMIT rolls back too. A call cancelled while it waits for its turn behind the file's other
    /// transactions, or for a connection, stops waiting at once and throws without beginning a transaction.
    /// The connection goes back to the pool, usable.
    ///
    /// An interrupted write makes SQLite roll the whole transaction back at once: the statements the block
    /// runs after it fail without reaching SQLite (code 516, `SQLITE_ABORT_ROLLBACK`), so nothing of the block
    /// is committed even when it goes on (see ``FMDatabase/inTransaction(_:_:)``).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/interrupt.html>
    ///
    /// - Throws: `CancellationError` when the task was cancelled (nothing was committed), or what
    ///   ``inTransaction(_:_:)`` throws.
    public func performTransaction<T: Sendable>(
        _ kind: FMDBTransactionKind = .exclusive,
        _ block: @escaping @Sendable (FMDatabase) throws -> T
    ) async throws -> T {
        let cancellation = BlockCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    let result = Result {
                        try self.inTurn(cancellation: cancellation) {
                            try self.withTransactionDatabase(kind, cancellation: cancellation) { db, markStarted in
                                if cancellation.isCancelled { throw CancellationError() }
                                return try db.inTransaction(kind) { db in
                                    markStarted()
                                    return try cancellation.run(on: db) { try block(db) }
                                }
                            }
                        }
                    }
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            cancellation.cancel()
            self.wakeCancelledWaiters()
        }
    }
}
