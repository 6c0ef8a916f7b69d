import CSQLCipher
import Foundation
import Logging

/// Hooks for `FMDatabasePool`: a class conforms and sets itself as the pool's `delegate`.
///
/// - Note: FMDB compatibility: on Apple platforms the delegate is an `NSObject` whose methods are
///   found by `respondsToSelector:`; here it is a protocol with default implementations.
public protocol FMDatabasePoolDelegate: AnyObject {
    /// Asked each time a connection is about to be handed to a block; false closes and drops it
    /// (the block is then not called).
    func databasePool(_ pool: FMDatabasePool, shouldAddDatabaseToPool database: FMDatabase) -> Bool
    /// Told when a new connection joins the pool.
    func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase)
}

extension FMDatabasePoolDelegate {
    /// Default: every connection is accepted.
    @discardableResult
    public func databasePool(_ pool: FMDatabasePool, shouldAddDatabaseToPool database: FMDatabase) -> Bool { true }
    /// Default: nothing.
    public func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {}
}

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
/// Sendable: safe to share between threads and tasks.
///
/// - Note: FMDB compatibility: FMDB hands `nil` to a non-optional block when its limit is hit or a
///   connection cannot be opened; here the call waits for a connection, and when none can be opened
///   (or the delegate refuses it) the block is not called, the error is logged and kept in
///   `lastError`, and the throwing variants throw it.
public final class FMDatabasePool: @unchecked Sendable {
    // @unchecked Sendable. Lock invariant: every mutable stored property below (`state`, `delegateBox`,
    // `maximum`) is read and written only while `condition` is locked. A checked-out FMDatabase is used
    // only by the thread that checked it out; checked-in ones are touched only under the lock.

    private struct Checkout {
        let database: FMDatabase
        let thread: pthread_t
        let generation: Int
    }

    private struct State {
        var checkedIn: [(database: FMDatabase, generation: Int)] = []
        var checkedOut: [ObjectIdentifier: Checkout] = [:]
        /// Connections being opened outside the lock: they count toward the limit.
        var opening = 0
        /// Bumped by rekey and releaseAllDatabases: connections of older generations are closed at check-in.
        var generation = 0
        var keyProvider: (any KeyProvider)?
        var rekeying = false
        var lastError: FMDatabaseError?
    }

    /// The path given at init (nil: in-memory).
    public let path: String?
    /// The `sqlite3_open_v2` flags given at init.
    public let openFlags: Int32
    /// The VFS name given at init.
    public let vfsName: String?
    /// Where the pool logs. Set before sharing the pool.
    public let logger: Logger

    private let condition = NSCondition()
    private var state = State()
    private weak var delegateStorage: (any FMDatabasePoolDelegate)?
    private var maximum = 0

    // MARK: - Initializers

    /// An in-memory database.
    public convenience init() {
        self.init(path: nil, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at `path`, read-write, created if needed.
    public convenience init(path: String?) {
        self.init(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at a file URL, read-write, created if needed.
    public convenience init(url: URL?) {
        self.init(path: url?.path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A database at `path`, opened with `flags`.
    public convenience init(path: String?, flags: Int32) {
        self.init(path: path, flags: flags, vfs: nil)
    }

    /// A database at a file URL, opened with `flags`.
    public convenience init(url: URL?, flags: Int32) {
        self.init(path: url?.path, flags: flags, vfs: nil)
    }

    /// A pool that opens connections lazily, when blocks need them.
    public init(path: String?, flags: Int32, vfs: String?) {
        self.path = path
        self.openFlags = flags
        self.vfsName = vfs
        self.logger = Logger(label: "fmdb")
    }

    /// A database at a file URL, opened with `flags` and a VFS.
    public convenience init(url: URL?, flags: Int32, vfs: String?) {
        self.init(path: url?.path, flags: flags, vfs: vfs)
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
        self.init(path: path, flags: flags, vfs: vfs)
        state.keyProvider = keyProvider
        let first = try openConnection(keyProvider: keyProvider)
        state.checkedIn.append((first, 0))
    }

    /// The keyed initializer, for a file URL.
    public convenience init(
        url: URL?,
        flags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        vfs: String? = nil,
        keyProvider: any KeyProvider
    ) throws {
        try self.init(path: url?.path, flags: flags, vfs: vfs, keyProvider: keyProvider)
    }

    deinit {
        for entry in state.checkedIn { entry.database.close() }
    }

    // MARK: - Properties

    /// Asked before each connection is handed out, told when one joins (weak).
    public weak var delegate: (any FMDatabasePoolDelegate)? {
        get { locked { delegateStorage } }
        set { locked { delegateStorage = newValue } }
    }

    /// The most connections the pool opens at once; 0 (the default) means no limit.
    public var maximumNumberOfDatabasesToCreate: Int {
        get { locked { maximum } }
        set {
            locked { maximum = max(0, newValue) }
            condition.broadcast()
        }
    }

    /// Connections idle in the pool.
    public var countOfCheckedInDatabases: Int { locked { state.checkedIn.count } }
    /// Connections in use by blocks now.
    public var countOfCheckedOutDatabases: Int { locked { state.checkedOut.count } }
    /// All open connections of the pool.
    ///
    /// - Note: FMDB compatibility: a keyed pool opens, keys and verifies one connection at init, so
    ///   this starts at 1.
    public var countOfOpenDatabases: Int { locked { state.checkedIn.count + state.checkedOut.count } }

    /// The last error met while supplying a database to a block, or nil.
    public var lastError: Error? { locked { state.lastError } }

    /// Closes every checked-in connection; checked-out ones are closed when they are checked in.
    public func releaseAllDatabases() {
        let idle: [FMDatabase] = locked {
            state.generation += 1
            defer { state.checkedIn.removeAll() }
            return state.checkedIn.map(\.database)
        }
        for db in idle { db.close() }
        condition.broadcast()
    }

    // MARK: - Checkout

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }

    private func openConnection(keyProvider: (any KeyProvider)?) throws -> FMDatabase {
        let db = FMDatabase(path: path)
        db.logger = logger
        guard db.open(withFlags: multiThreadFlags(openFlags), vfs: vfsName) else { throw db.lastError() }
        if let keyProvider {
            do {
                try db.setKey(using: keyProvider)
            } catch {
                db.close()
                throw error
            }
        }
        return db
    }

    private func record(_ error: Error) -> FMDatabaseError {
        let value = (error as? FMDatabaseError) ?? FMDatabaseError(code: SQLITE_ERROR, message: "\(error)")
        locked { state.lastError = value }
        logger.error("FMDatabasePool could not supply a database for \(path ?? ":memory:"): \(value.message)")
        return value
    }

    /// Checks a connection out for the calling thread, waiting while the limit is reached.
    private func checkOut() throws -> FMDatabase {
        let me = pthread_self()
        condition.lock()
        var isNew = false
        var candidate: (database: FMDatabase, generation: Int)?
        while true {
            if !state.rekeying, let entry = state.checkedIn.popLast() {
                candidate = entry
                break
            }
            let total = state.checkedIn.count + state.checkedOut.count + state.opening
            if !state.rekeying, maximum == 0 || total < maximum {
                state.opening += 1
                isNew = true
                break
            }
            if !state.rekeying, !state.checkedOut.isEmpty, state.opening == 0,
               state.checkedOut.values.allSatisfy({ pthread_equal($0.thread, me) != 0 }) {
                condition.unlock()
                programmingError(
                    "FMDatabasePool: every connection (maximumNumberOfDatabasesToCreate = \(maximum)) is held by this "
                        + "thread, in an enclosing pool block: this nested call could never be served. Raise the limit, "
                        + "or use the database of the enclosing block."
                )
            }
            condition.wait()
        }
        let generation = state.generation
        let provider = state.keyProvider
        let delegate = delegateStorage
        condition.unlock()

        let db: FMDatabase
        if let candidate {
            db = candidate.database
        } else {
            do {
                db = try openConnection(keyProvider: provider)
            } catch {
                locked { state.opening -= 1 }
                condition.broadcast()
                throw error
            }
        }
        if let delegate, !delegate.databasePool(self, shouldAddDatabaseToPool: db) {
            db.close()
            locked { if isNew { state.opening -= 1 } }
            condition.broadcast()
            throw FMDatabaseError.misuse("The pool's delegate refused the connection (shouldAddDatabaseToPool returned false).")
        }
        locked {
            if isNew { state.opening -= 1 }
            state.checkedOut[ObjectIdentifier(db)] = Checkout(database: db, thread: me, generation: candidate?.generation ?? generation)
        }
        db.checkedOut = true
        if isNew { delegate?.databasePool(self, didAddDatabase: db) }
        return db
    }

    /// Checks a connection back in: closes result sets and rolls back a transaction the block left
    /// open; closes it instead when the pool moved to a new generation (rekey, release).
    private func checkIn(_ db: FMDatabase) {
        db.checkedOut = false
        if db.hasOpenResultSets {
            logger.warning("Warning: there is at least one open result set around after performing [FMDatabasePool inDatabase:]")
            db.closeOpenResultSets()
        }
        if db.isInTransaction {
            logger.warning("A pool block left a transaction open; it was rolled back.")
            db.rollback()
        }
        let stale: Bool = locked {
            let checkout = state.checkedOut.removeValue(forKey: ObjectIdentifier(db))
            let stale = checkout.map { $0.generation != state.generation } ?? true
            if !stale, db.isOpen { state.checkedIn.append((db, state.generation)) }
            return stale
        }
        if stale { db.close() }
        condition.broadcast()
    }

    private func withDatabase<T>(_ body: (FMDatabase) throws -> T) throws -> T {
        let db: FMDatabase
        do {
            db = try checkOut()
        } catch {
            throw record(error)
        }
        defer { checkIn(db) }
        return try body(db)
    }

    // MARK: - FMDB API

    /// Runs `block` with a connection of the pool (calls may nest: each gets its own connection).
    public func inDatabase(_ block: (FMDatabase) -> Void) {
        _ = try? withDatabase { block($0) }
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

    private func inTransaction(kind: FMDBTransactionKind, _ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) {
        do {
            try withDatabase { db in
                do {
                    try db.runTransaction(kind: kind, block)
                } catch {
                    _ = record(error)
                }
            }
        } catch {
            // Already recorded and logged by withDatabase.
        }
    }

    /// Runs `block` inside a savepoint on one connection; `rollback.pointee = true` rolls it back.
    @discardableResult
    public func inSavePoint(_ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) -> Error? {
        do {
            return try withDatabase { db in db.inSavePoint { rollback in block(db, rollback) } }
        } catch {
            return error
        }
    }

    /// Changes the key of the database and of every connection of the pool: waits until every
    /// connection is checked in (new checkouts wait meanwhile), rekeys on one connection outside any
    /// transaction with a busy timeout, verifies the new key on a fresh connection, checkpoints the
    /// WAL (TRUNCATE), and closes every other connection so later ones open with the new key. If
    /// anything fails the database still opens with the old key, and the pool keeps using it.
    public func rekey(using provider: any KeyProvider) throws {
        let me = pthread_self()
        condition.lock()
        if state.checkedOut.values.contains(where: { pthread_equal($0.thread, me) != 0 }) {
            condition.unlock()
            programmingError("FMDatabasePool.rekey was called from inside a pool block: it waits for every connection to be checked in, so it would deadlock.")
        }
        while state.rekeying || !state.checkedOut.isEmpty || state.opening > 0 {
            condition.wait()
        }
        state.rekeying = true
        let idle = state.checkedIn.map(\.database)
        state.checkedIn.removeAll()
        let oldProvider = state.keyProvider
        condition.unlock()
        defer {
            locked { state.rekeying = false }
            condition.broadcast()
        }
        for db in idle.dropFirst() { db.close() }
        let db: FMDatabase
        if let first = idle.first, first.isOpen {
            db = first
        } else {
            db = try openConnection(keyProvider: oldProvider)
        }
        do {
            try db.rekeySafely(using: provider, path: path, flags: openFlags, vfs: vfsName)
        } catch {
            db.close()
            throw record(error)
        }
        locked {
            state.keyProvider = provider
            state.generation += 1
            state.checkedIn = [(db, state.generation)]
        }
    }

    // MARK: - Swift-native API

    /// Runs `block` with a connection and returns its result; nil when none could be supplied.
    @discardableResult
    public func inDatabase<T>(_ block: (FMDatabase) -> T) -> T? {
        try? withDatabase(block)
    }

    /// Runs a throwing `block` with a connection and returns its result.
    @discardableResult
    public func inDatabase<T>(_ block: (FMDatabase) throws -> T) throws -> T {
        try withDatabase(block)
    }

    /// Runs `block` in a transaction: commits when it returns, rolls back when it throws.
    @discardableResult
    public func inTransaction<T>(_ kind: FMDBTransactionKind, _ block: (FMDatabase) throws -> T) throws -> T {
        try withDatabase { db in try db.inTransaction(kind, block) }
    }

    /// Runs `block` with a connection without blocking the calling task (the wait for a connection and
    /// the work happen on a Dispatch thread).
    @discardableResult
    public func perform<T: Sendable>(_ block: @escaping @Sendable (FMDatabase) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    continuation.resume(returning: try self.withDatabase(block))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// `inTransaction(_:_:)` without blocking the calling task.
    public func performTransaction<T: Sendable>(
        _ kind: FMDBTransactionKind = .exclusive,
        _ block: @escaping @Sendable (FMDatabase) throws -> T
    ) async throws -> T {
        try await perform { db in try db.inTransaction(kind, block) }
    }
}
