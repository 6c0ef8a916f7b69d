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
public final class FMDatabasePool: FMDatabaseWriter, @unchecked Sendable {
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
        /// A rekey has its turn (every connection was checked in; checkouts wait) and runs: a
        /// `replaceKeyProvider` waits for it.
        var rekeying = false
        /// A `replaceKeyProvider` is checking its provider: a rekey waits for it (and it for a rekey).
        var replacingKey = false
        /// Bumped each time the file's key changes through this process (a rekey, here or through another
        /// queue or pool of the file): a `replaceKeyProvider` that checked its provider before checks again.
        var keyEpoch = 0
        var lastError: FMDatabaseError?
    }

    public let path: String?
    public let openFlags: Int32
    public let vfsName: String?
    public let logger: Logger
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
    /// memory); written only by a keyed initializer.
    var keyPath: String?
    /// The file's first-come, first-served queue for transactions, shared by every pool on the file in
    /// this process (Core/WriteGate.swift); immutable, Sendable.
    private let writeGate: WriteGate
    private var queueTimeout: TimeInterval?
    private weak var delegateStorage: (any FMDatabasePoolDelegate)?
    /// Runs on every new connection after keying, before any block gets it (immutable).
    let prepareDatabase: (@Sendable (FMDatabase) throws -> Void)?
    /// The configuration's busy timeout, set on each connection as it opens (nil: FMDB's default).
    let busyTimeout: TimeInterval?

    // MARK: - Initializers

    /// A pool set up by `configuration`: keyed (its first connection opened, keyed and verified now, and kept
    /// checked in for use) when the configuration has a key provider, otherwise opening connections lazily,
    /// when blocks need them. Every later connection is keyed when the pool opens it.
    ///
    /// The configuration's `prepareDatabase` runs once on each new connection, after it is keyed and verified:
    /// on the one this initializer opens, on each one the pool opens later, and on one a rekey had to reopen.
    /// Unlike a delegate set after init, it cannot miss a connection. It runs on the thread that opens the
    /// connection, outside the pool's lock; it must not call the pool.
    ///
    /// ```swift
    /// var configuration = FMDatabaseConfiguration(keyProvider: provider)
    /// configuration.maximumNumberOfDatabasesToCreate = 8
    /// configuration.prepareDatabase = { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil) }
    /// let pool = try FMDatabasePool(path: path, configuration: configuration)
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/foreignkeys.html#fk_enable>
    ///
    /// - Parameters:
    ///   - path: The database file; nil for an in-memory database.
    ///   - flags: `sqlite3_open_v2` flags.
    ///   - vfs: The VFS name, or nil for the default.
    ///   - configuration: The key provider, logging, connection set-up and limits (the starting values of
    ///     ``maximumNumberOfDatabasesToCreate`` and ``transactionQueueTimeout``).
    /// - Throws: `FMDatabaseError`: code 26 for a wrong key, the open error, or what `prepareDatabase` threw.
    /// - Note: FMDB compatibility: a Swift-native addition (GRDB's `Configuration`). FMDB's
    ///   `databasePool(_:didAddDatabase:)` is also told about every connection here, including the one
    ///   this initializer opened, at its first checkout.
    public convenience init(
        path: String?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        configuration: FMDatabaseConfiguration
    ) throws {
        self.init(unopenedPath: path, flags: flags, vfs: vfs, configuration: configuration)
        guard let keyProvider = configuration.keyProvider else { return }
        state.keyProvider = keyProvider
        let first = try openConnection(keyProvider: keyProvider)
        connections.add(PooledConnection(database: first, announced: false))
        keyPath = KeyChangeRegistry.registeredPath(path)
        KeyChangeRegistry.shared.register(self, path: keyPath)
    }

    /// A pool set up by `configuration`, for a file URL (see ``init(path:flags:vfs:configuration:)``).
    public convenience init(
        url: URL?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        configuration: FMDatabaseConfiguration
    ) throws {
        try self.init(path: url?.path, flags: flags, vfs: vfs, configuration: configuration)
    }

    /// A keyed pool: opens, keys and verifies one connection at init (kept checked in for use), and
    /// keys every later connection when it opens it: ``init(path:flags:vfs:configuration:)`` with only a key
    /// provider.
    /// - Throws: `FMDatabaseError`: code 26 for a wrong key, the open error otherwise.
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

    /// An in-memory database (see ``init(path:flags:vfs:)``).
    public convenience init() {
        self.init(path: nil, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at `path`, read-write, created if needed (see ``init(path:flags:vfs:)``).
    public convenience init(path: String?) {
        self.init(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at a file URL, read-write, created if needed (see ``init(path:flags:vfs:)``).
    public convenience init(url: URL?) {
        self.init(path: url?.path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at `path`, opened with `flags` (see ``init(path:flags:vfs:)``).
    public convenience init(path: String?, flags: Int32) {
        self.init(path: path, flags: flags, vfs: nil)
    }

    /// A database at a file URL, opened with `flags` (see ``init(path:flags:vfs:)``).
    public convenience init(url: URL?, flags: Int32) {
        self.init(path: url?.path, flags: flags, vfs: nil)
    }

    /// A pool that opens connections lazily, when blocks need them (``init(path:flags:vfs:configuration:)``
    /// sets up logging, each connection and the limits).
    ///
    /// ```swift
    /// let pool = FMDatabasePool(path: path, flags: SQLITE_OPEN_READWRITE, vfs: nil)
    /// ```
    ///
    /// - Parameters:
    ///   - path: The database file; nil for an in-memory database.
    ///   - flags: `sqlite3_open_v2` flags.
    ///   - vfs: The VFS name, or nil for the default.
    public convenience init(path: String?, flags: Int32, vfs: String?) {
        self.init(unopenedPath: path, flags: flags, vfs: vfs, configuration: FMDatabaseConfiguration())
    }

    /// A database at a file URL, opened with `flags` and a VFS (see ``init(path:flags:vfs:)``).
    public convenience init(url: URL?, flags: Int32, vfs: String?) {
        self.init(path: url?.path, flags: flags, vfs: vfs)
    }

    /// The one designated initializer: sets up the pool without opening anything.
    init(unopenedPath path: String?, flags: Int32, vfs: String?, configuration: FMDatabaseConfiguration) {
        self.path = path
        self.openFlags = flags
        self.vfsName = vfs
        self.logger = configuration.logger
        self.logsErrors = configuration.logsErrors
        self.writeGate = WriteGate.shared(forPath: path)
        self.prepareDatabase = configuration.connectionSetUp
        self.busyTimeout = configuration.busyTimeout
        self.queueTimeout = configuration.transactionQueueTimeout
        connections.limit = configuration.maximumNumberOfDatabasesToCreate
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
        } catch FMResultCode.notADatabase where provider != nil {
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
            record(error, logs: false)
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
                            record(error, "transaction failed")
                        }
                    }
                } catch {
                    record(error)
                }
            }
        } catch {
            record(error, "could not start a transaction")  // The gate refused: nested, or timed out.
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
            record(error, logs: false)
            return error
        }
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

    @discardableResult
    @_disfavoredOverload
    public func inDatabase<T>(_ block: (FMDatabase) throws -> T) throws -> T {
        try withDatabase(block)
    }

    @discardableResult
    public func inTransaction<T>(_ kind: FMDBTransactionKind, _ block: (FMDatabase) throws -> T) throws -> T {
        try runTransaction(kind, block)
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

extension FMDatabasePool: DatabaseWriterCore {
    func storeLastError(_ error: FMDatabaseError) {
        locked { state.lastError = error }
    }

    /// On a Dispatch thread, which waits there for a connection (the caller's `QueuedCall` is resumed at once
    /// when its task is cancelled before the work starts).
    func scheduleAsync(_ work: @escaping @Sendable () -> Void) {
        DispatchQueue.global().async(execute: work)
    }

    func wakeWaitersAfterCancellation() {
        wakeCancelledWaiters()
    }

    func withConnection<T>(cancellation: BlockCancellation?, _ body: (FMDatabase) throws -> T) throws -> T {
        try withDatabase(cancellation: cancellation, body)
    }

    func withTransactionConnection<T>(
        _ kind: FMDBTransactionKind, cancellation: BlockCancellation?,
        _ body: (FMDatabase, _ markStarted: () -> Void) throws -> T
    ) throws -> T {
        try inTurn(cancellation: cancellation) {
            try withTransactionDatabase(kind, cancellation: cancellation, body)
        }
    }
}
