import Foundation
import Logging
import Synchronization

/// One SQLite (SQLCipher) database connection: FMDB's `FMDatabase`, in Swift, on Linux.
///
/// ```swift
/// let db = FMDatabase(path: "/tmp/app.sqlite")
/// guard db.open() else { throw db.lastError() }
/// db.setKey("correct horse battery staple")
/// db.executeUpdate("CREATE TABLE IF NOT EXISTS t (a INTEGER, b TEXT)")
/// db.executeUpdate("INSERT INTO t VALUES (?, ?)", 1, "one")
/// if let rs = db.executeQuery("SELECT a, b FROM t") {
///     while rs.next() { print(rs.int(forColumn: "a"), rs.string(forColumn: "b") ?? "") }
/// }
/// db.close()
/// ```
///
/// Not Sendable: use one `FMDatabase` from one thread at a time, or use `FMDatabaseQueue` /
/// `FMDatabasePool`.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/open.html>
///
/// - Note: FMDB compatibility: `final` (no subclassing); errors the library detects itself
///   (wrong bind counts, closed databases, misuse) get real codes (`SQLITE_RANGE`,
///   `SQLITE_MISUSE`) in `lastError()`, where FMDB only logged them.
public final class FMDatabase {
    /// The path given at init: nil for an in-memory database, "" for a temporary file.
    public let databasePath: String?
    /// Where log lines go (`traceExecution`, `logsErrors`). Swift-native addition.
    public var logger: Logger

    // Read at every statement: `@exclusivity(unchecked)` here and on the two below makes a read a load
    // rather than a dynamic exclusivity check (swift_beginAccess, ~76 instructions each by callgrind).
    /// Log every SQL statement run (SQL text only, never bound values or keys), at `.info`.
    ///
    /// - Note: FMDB compatibility: lines go to ``logger`` (swift-log, label `fmdb`), not `NSLog`.
    @exclusivity(unchecked) public var traceExecution = false
    /// Log every error the FMDB forms (those that return false or nil) meet, at `.error`. On by default,
    /// as FMDB. Errors the throwing forms throw are not logged: the caller has them, and logging them
    /// too would report a handled error (a caught UNIQUE violation) as a failure.
    ///
    /// ```swift
    /// db.logsErrors = false
    /// ```
    /// - Note: FMDB compatibility: FMDB's `...error:` forms both logged and returned the error.
    public var logsErrors = true
    /// Stop the process on any error (a debugging aid the program opts into, as FMDB's).
    public var crashOnErrors = false

    /// True while a queue's or pool's BEGIN serves as the connection's key check (see `begin(_:)`).
    var beginProbesKey = false
    /// When this keyed connection last read the file under its key before a block (`DispatchTime` uptime
    /// nanoseconds; 0: never, or it met another key since), for the per-block key check
    /// (QueueAndPool/KeyChanges/FMDatabase+KeyCheck.swift).
    var keyConfirmedAt: UInt64 = 0
    /// What the key check found when this connection failed it (it is then replaced, and never read again
    /// under its key: SQLCipher 4.7 and later keep a failed page read for the connection's life).
    var keyCheckFailed: KeyCheckFailure?
    var keyCheckCounters: StatisticsCounters?  // The pool's, counting key checks (FMDatabaseStatistics.swift).
    /// Set by `FMDatabasePool` while a block uses this connection.
    public var checkedOut = false
    /// Who may use the connection (QueueAndPool/FMDatabase+Lending.swift marks it): `notLent` when no
    /// queue or pool owns it, `betweenBlocks` when one does and no block runs, else the `pthread_t` of
    /// the thread running a block. Atomic: a connection that escaped its block is read from elsewhere.
    let lending = Atomic<UInt>(0)

    /// Keep prepared statements for reuse by SQL text. Off by default, as FMDB.
    @exclusivity(unchecked) public var shouldCacheStatements = false {
        didSet { if !shouldCacheStatements { clearCachedStatements() } }
    }

    /// How long to retry when the database is busy (SQLite's busy timeout). Default 2 seconds, as
    /// FMDB; 0 (and NaN, which reads back as 0, or a negative) fails at once with `SQLITE_BUSY`. SQLite
    /// counts it in whole milliseconds up to `Int32.max` (about 24.8 days), which is what infinity means
    /// here.
    public var maxBusyRetryTimeInterval: TimeInterval = 2 {
        didSet {
            // NaN is stored as 0, what it means, so code reading the property (max(5, ...) and the like)
            // never meets it.
            if maxBusyRetryTimeInterval.isNaN { maxBusyRetryTimeInterval = 0 }
            applyBusyTimeout()
        }
    }

    var connection: Connection?
    var openFlags: Int32 = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
    var openVFS: String?
    @exclusivity(unchecked) var statementCache = StatementCache()
    /// The most recently opened result set still open; the others follow through `nextOpen` (see
    /// `resultSetDidOpen`).
    unowned(unsafe) var newestOpenResultSet: FMResultSet?
    var lastErrorValue: FMDatabaseError?
    var dateFormatter: DateFormatter?
    var savePointCounter = 0
    /// The key bytes this connection was keyed with through this API (kept to allow the same key again,
    /// to refuse a different one, and to restore the old key after a failed rekey). Not whether it is keyed:
    /// that is SQLCipher's answer (`Connection.isKeyed`), which SQL text (`PRAGMA key`) can make true too.
    var appliedKey: SecureBytes?
    /// The files `open` created (the database did not exist), until a key is set.
    var filesCreatedByOpen: CreatedFiles?
    /// A keying of the file `open` created failed (`setKey(using:settings:)`): `close()` removes the file
    /// while it is still empty.
    var keyingFailedOnCreatedFile = false
    /// The cipher settings `setKey(using:settings:)` applied with that key (re-applied on reopen).
    var keySettings = CipherSettings()
    /// Set only by `KeySlots.rotateDataKey`: this connection's rekey is a data key rotation, which
    /// re-wraps the slots beside the file; every other rekey of a slotted database is refused.
    var isKeySlotRotation = false

    /// A database at `path`. nil: in-memory; "": a temporary file, deleted on close.
    public init(path: String?) {
        databasePath = path
        logger = Logger(label: "fmdb")
    }

    /// A database at `url` (a file URL); nil: in-memory.
    public convenience init(url: URL?) {
        self.init(path: url?.path)
    }

    /// An in-memory database.
    public convenience init() {
        self.init(path: nil)
    }

    deinit {
        closeConnection()
    }

    /// `databasePath` as a file URL; nil for in-memory and temporary databases.
    public var databaseURL: URL? {
        guard let databasePath, !databasePath.isEmpty else { return nil }
        return URL(fileURLWithPath: databasePath)
    }

    /// The `sqlite3*` handle, as Apple imports `void *`: `OpaquePointer(db.sqliteHandle)`.
    ///
    /// - Note: FMDB compatibility: on a keyed connection, SQL run through the C API on this handle is
    ///   still checked by the library's authorizer (`PRAGMA page_size` is refused).
    public var sqliteHandle: UnsafeMutableRawPointer? {
        connection?.handle.map { UnsafeMutableRawPointer($0) }
    }

    /// Whether the database is open.
    public var isOpen: Bool { connection != nil }

    /// Whether the connection is open and can read its schema (with the right key, for an
    /// encrypted database).
    public var goodConnection: Bool {
        guard isOpen else { return false }
        guard let rs = executeQuery("SELECT name FROM sqlite_master WHERE type='table'") else { return false }
        rs.close()
        return true
    }

    /// The path SQLite is given: FMDB's mapping of nil and "".
    var sqlitePath: String {
        guard let databasePath else { return ":memory:" }
        return databasePath
    }

    /// `databasePath` as a log line shows it: ":memory:" for nil, and a `file:` URI without its query, which
    /// may hold a key (`file:app.db?key=...`, read by SQLCipher 4 when the URI is opened with
    /// `SQLITE_OPEN_URI`).
    var loggablePath: String { SQLRedaction.loggablePath(databasePath ?? ":memory:") }

    /// Whether the database lives in a file other connections could open.
    var isFileBacked: Bool {
        guard let databasePath, !databasePath.isEmpty, databasePath != ":memory:" else { return false }
        return !databasePath.hasPrefix("file:")
    }

    // MARK: - Open and close

    /// Opens the database read-write, creating it if needed.
    ///
    /// The connection is opened in SQLite's multi-thread mode (`SQLITE_OPEN_NOMUTEX`): an `FMDatabase`
    /// is used by one thread at a time (it is not `Sendable`; share a queue or pool instead), so SQLite
    /// need not lock its mutex around every call. `interrupt()` stays safe from any thread.
    /// - Note: FMDB compatibility: FMDB's `open` uses SQLite's default (serialized) mode.
    @discardableResult
    public func open() -> Bool {
        open(withFlags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs: nil)
    }

    /// Opens the database with `sqlite3_open_v2` flags (`SQLITE_OPEN_READONLY`, ...).
    @discardableResult
    public func open(withFlags flags: Int32) -> Bool {
        open(withFlags: flags, vfs: nil)
    }

    /// Opens the database with flags and a VFS name.
    ///
    /// Checks that the linked library is SQLCipher (`PRAGMA cipher_version` answers) and fails with
    /// a clear error if not. Returns true when already open.
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/open.html>
    @discardableResult
    public func open(withFlags flags: Int32, vfs vfsName: String?) -> Bool {
        if connection != nil { return true }
        var created = CreatedFiles(databasePath: isFileBacked ? databasePath : nil)
        let opened = recordingBool { try openConnection(flags: flags, vfs: vfsName) }
        if opened { created?.noteOpened() }
        filesCreatedByOpen = opened && created?.databaseWasCreated == true ? created : nil
        keyingFailedOnCreatedFile = false
        return opened
    }

    func openConnection(flags: Int32, vfs vfsName: String?) throws {
        guard SQLCipherRuntime.version != nil else {
            throw FMDatabaseError(
                code: SQLITE_ERROR,
                message: "The linked SQLite library is not SQLCipher (PRAGMA cipher_version gave no answer)."
                    + " Link libsqlcipher only, never a system libsqlite3 beside it."
            )
        }
        // Once per process, before any connection can be keyed (setKey(using:), FMDB's setKey(_:) or SQL
        // `PRAGMA key`): on SQLCipher 4 this turns off its per-page error log (SQLCipherRuntime.majorVersion).
        _ = SQLCipherRuntime.majorVersion
        if isFileBacked, let path = databasePath {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw FMDatabaseError(
                    code: SQLITE_CANTOPEN, message: "unable to open database file: \(path) is a directory")
            }
        }
        let opened = try Connection.open(path: sqlitePath, flags: flags, vfs: vfsName)
        connection = opened
        openFlags = flags
        openVFS = vfsName
        applyBusyTimeout()
    }

    private func applyBusyTimeout() {
        connection?.setBusyTimeout(maxBusyRetryTimeInterval)
    }

    /// Closes the database: finalizes cached statements, closes open result sets, closes the handle.
    /// A temporary ("") database is deleted. Returns true when it was not open.
    ///
    /// When this `open` created the file and `setKey(using:)` then failed on it, and the file is still
    /// empty, the file (and any `-journal`, `-wal`, `-shm` the open made) is removed: a failed keying of a
    /// new database leaves nothing behind.
    ///
    /// A connection a queue or pool lent to a block, used outside it, is not closed: false, with
    /// `SQLITE_MISUSE`.
    @discardableResult
    public func close() -> Bool {
        guard connection != nil else { return true }
        guard recordingBool({ closeConnection() }) else { return false }
        if keyingFailedOnCreatedFile, let created = filesCreatedByOpen, let path = databasePath,
            DatabaseFile.kind(atPath: path).isNew
        {
            // A failed keying of a file this open created leaves nothing behind.
            created.removeCreated()
        }
        filesCreatedByOpen = nil
        keyingFailedOnCreatedFile = false
        return true
    }

    func closeConnection() {
        clearCachedStatements()
        closeOpenResultSets()
        if let connection {
            do {
                try connection.close()
            } catch {
                record(error)
                logError(error)
            }
        }
        connection = nil
        keyConfirmedAt = 0
        keyCheckFailed = nil
        appliedKey = nil
        keySettings = CipherSettings()
    }

    /// Finalizes every cached statement.
    public func clearCachedStatements() {
        statementCache.removeAll()
    }

    /// Closes every open result set of this database.
    public func closeOpenResultSets() {
        while let rs = newestOpenResultSet {
            rs.close()
            // close() unlinks the set; never loop on one that did not.
            if newestOpenResultSet === rs { resultSetDidClose(rs) }
        }
    }

    /// Closes the result sets a queue or pool block left open, except reusable ones from `prepare(_:)`
    /// (which live until their own `close()`); returns how many it closed.
    func closeTransientResultSets() -> Int {
        var sets: [FMResultSet] = []
        var cursor = newestOpenResultSet
        while let rs = cursor {
            if !rs.isReusable { sets.append(rs) }
            cursor = rs.nextOpen
        }
        for rs in sets { rs.close() }
        return sets.count
    }

    /// Whether any result set of this database is still open.
    public var hasOpenResultSets: Bool { newestOpenResultSet != nil }

    /// Links a new result set at the head of the open list: a result set per query costs two pointer
    /// stores here, where a dictionary entry cost a hash, an insertion and a removal (~600
    /// instructions a query by callgrind). The links are unowned: every set unlinks itself in
    /// `close()`, which its `deinit` calls.
    func resultSetDidOpen(_ rs: FMResultSet) {
        rs.previousOpen = nil
        rs.nextOpen = newestOpenResultSet
        newestOpenResultSet?.previousOpen = rs
        newestOpenResultSet = rs
    }

    func resultSetDidClose(_ rs: FMResultSet) {
        let previous = rs.previousOpen
        let next = rs.nextOpen
        if let previous {
            previous.nextOpen = next
        } else if newestOpenResultSet === rs {
            newestOpenResultSet = next
        } else {
            return  // not linked
        }
        next?.previousOpen = previous
        rs.previousOpen = nil
        rs.nextOpen = nil
    }

    // MARK: - Errors

    /// The one way an FMDB entry point runs: clears the last error, runs `body`, and records what it
    /// throws for `lastError()` before rethrowing it (not logged: the caller has it; the Bool and
    /// optional forms log it). Every entry point goes
    /// through this, directly or through `recordingBool` / `recordingOptional`, so none can forget to
    /// reset the error (FMDB's stale-`lastError` bug).
    @inline(__always)
    func recording<T>(_ body: () throws -> T) throws -> T {
        let lent = lending.load(ordering: .relaxed)
        if lent != Lending.notLent, lent != UInt(pthread_self()) { try refuseUseOutsideItsBlock(lent) }
        clearLastError()
        do {
            return try body()
        } catch {
            record(error)
            throw error
        }
    }

    /// Forgets the last error: the start of every entry point (`recording`, and a result set's step to a
    /// row, which skips `recording` on that hot path).
    @inline(__always)
    func clearLastError() {
        lastErrorValue = nil
    }

    /// FMDB's Bool shape of `recording`: false on error.
    @discardableResult
    func recordingBool(_ body: () throws -> Void) -> Bool {
        do {
            try recording(body)
            return true
        } catch {
            logError(error)
            return false
        }
    }

    /// FMDB's optional shape of `recording`: nil on error.
    func recordingOptional<T>(_ body: () throws -> T) -> T? {
        do {
            return try recording(body)
        } catch {
            logError(error)
            return nil
        }
    }

    /// The message of the SQLITE_MISUSE a connection used outside its queue's or pool's block gets.
    static let usedOutsideItsBlockMessage = "this FMDatabase belongs to a queue/pool: use it only inside the block"

    /// A connection of a queue or pool used outside the block it was lent to (it escaped: `let leaked
    /// = queue.inDatabase { $0 }`): SQLITE_MISUSE. `lastError` is set only when no block is running;
    /// while one runs on another thread, writing it here would race with that block.
    ///
    /// Logged at error level, by the throwing forms too: it is a bug in the program, not an error a caller
    /// handles. Logged once (`logError` skips it). With no block running, through the connection's
    /// `logger` while `logsErrors` is on; while a block runs on another thread, that block may be changing
    /// `logger` or `logsErrors`, so neither is read here and the line goes to a logger labelled "fmdb".
    @inline(never)
    func refuseUseOutsideItsBlock(_ lent: UInt) throws -> Never {
        let error = FMDatabaseError.misuse(Self.usedOutsideItsBlockMessage)
        let line: Logger.Message =
            """
            FMDatabase \(loggablePath) used outside the queue/pool block it was lent to (it escaped the \
            block): refused with SQLITE_MISUSE
            """
        if lent == Lending.betweenBlocks {
            record(error)
            if logsErrors { logger.error(line) }
        } else {
            Logger(label: "fmdb").error(line)
        }
        throw error
    }

    /// Stores an error for `lastError()`. Only `recording` and the close path call it.
    private func record(_ error: Error) {
        let value =
            (error as? FMDatabaseError)
            ?? FMDatabaseError(code: SQLITE_ERROR, message: String(describing: error))
        lastErrorValue = value
        // An error a failed page read gives (the file may be under a key this connection does not hold): its
        // queue or pool checks it before the next block, however recently it passed the check, even when the
        // block's FMDB form hides this error.
        let mayMeanAnotherKey = Self.mayMeanAnotherKey(value.resultCode)
        if mayMeanAnotherKey { keyConfirmedAt = 0 }
        // A queue's or pool's BEGIN that meets another key is its key check, handled by beginning again on
        // a new connection: not an error of the program's.
        if crashOnErrors, !(beginProbesKey && mayMeanAnotherKey) {
            programmingError("FMDatabase.crashOnErrors is set and an error occurred: \(value)")
        }
    }

    /// Logs an error an FMDB form met and did not throw, when `logsErrors`: the forms that return false
    /// or nil call it (the throwing forms leave the error to their caller).
    func logError(_ error: Error) {
        guard logsErrors else { return }
        let value =
            (error as? FMDatabaseError)
            ?? FMDatabaseError(code: SQLITE_ERROR, message: String(describing: error))
        // Already logged where it was refused.
        if value.message == Self.usedOutsideItsBlockMessage { return }
        logger.error("DB Error: \(value.code) \"\(value.message)\"")
        if let sql = value.sql { logger.error("DB Query: \(sql)") }
        logger.error("DB Path: \(loggablePath)")
    }

    /// The message of the last error, or SQLite's current message.
    @discardableResult
    public func lastErrorMessage() -> String {
        if let lastErrorValue { return lastErrorValue.message }
        return connection?.currentErrorMessage ?? "not an error"
    }

    /// The primary result code of the last error (0 when there was none).
    @discardableResult
    public func lastErrorCode() -> Int32 {
        if let lastErrorValue { return lastErrorValue.resultCode }
        return (connection?.currentExtendedErrorCode ?? SQLITE_OK) & 0xFF
    }

    /// The extended result code of the last error.
    @discardableResult
    public func lastExtendedErrorCode() -> Int32 {
        if let lastErrorValue { return lastErrorValue.extendedCode }
        return connection?.currentExtendedErrorCode ?? SQLITE_OK
    }

    /// Whether the last call failed (its code is an error, not OK/ROW/DONE).
    @discardableResult
    public func hadError() -> Bool {
        let code = lastErrorCode()
        return code > SQLITE_OK && code < SQLITE_ROW
    }

    /// The last error as an `NSError`-bridging `FMDatabaseError` (domain "FMDatabase").
    @discardableResult
    public func lastError() -> Error {
        if let lastErrorValue { return lastErrorValue }
        return FMDatabaseError(code: lastExtendedErrorCode(), message: lastErrorMessage())
    }

    // MARK: - Statements (internal engine)

    func requireConnection(sql: String? = nil) throws -> Connection {
        guard let connection else { throw FMDatabaseError.closed(sql: sql) }
        return connection
    }

    /// A statement for `sql`: from the cache when caching, else freshly prepared; marked in use.
    func acquireStatement(_ sql: String) throws -> Statement {
        guard connection != nil else { throw FMDatabaseError.closed(sql: sql) }
        if traceExecution {
            logger.info("\(loggablePath) executeQuery: \(FMDatabaseError.loggable(sql))")
        }
        let caching = shouldCacheStatements
        // A cached statement is not prepared again: settle a key PRAGMA or ATTACH here, as prepare does.
        try requireConnection(sql: sql).settlePendingSQLKey()
        if caching, let cached = statementCache.take(sql) {
            cached.inUse = true
            return cached
        }
        let statement = try requireConnection(sql: sql).prepare(sql)
        if caching { statementCache.insert(statement) }
        statement.inUse = true
        return statement
    }

    /// Gives a statement back: reset for reuse when cached, finalized otherwise.
    func releaseStatement(_ statement: Statement) {
        statement.inUse = false
        if statement.isCached {
            statement.reset()
        } else {
            statement.finalize()
        }
    }

    /// Prepares, binds, steps once; throws unless the statement completes.
    func update(_ sql: String, bind: (Statement) throws -> Void) throws {
        let statement = try acquireStatement(sql)
        defer { releaseStatement(statement) }
        try bind(statement)
        let rc = statement.step()
        switch rc {
        case SQLITE_DONE, SQLITE_OK:
            return
        case SQLITE_ROW:
            throw FMDatabaseError(
                code: SQLITE_MISUSE,
                message: "A executeUpdate is being called with a query string '\(FMDatabaseError.loggable(sql))'",
                sql: sql
            )
        default:
            throw statement.connection.error(code: rc, sql: sql)
        }
    }

    /// Prepares and binds; the result set owns the statement until it closes.
    func query(_ sql: String, bind: (Statement) throws -> Void) throws -> FMResultSet {
        let statement = try acquireStatement(sql)
        do {
            try bind(statement)
        } catch {
            releaseStatement(statement)
            throw error
        }
        return FMResultSet(statement: statement, parent: self)
    }

    // MARK: - Updates

    /// Runs one statement that returns no rows, with positional arguments.
    ///
    /// ```swift
    /// db.executeUpdate("INSERT INTO t (a, b) VALUES (?, ?)", 42, "text")
    /// ```
    /// - Returns: false on error (see `lastError()`), including a bind count that does not match.
    @discardableResult
    public func executeUpdate(_ sql: String, _ arguments: Any?...) -> Bool {
        executeUpdate(sql, arrayArguments: arguments)
    }

    /// Runs one statement that returns no rows, with an array of arguments.
    ///
    /// - Note: FMDB compatibility: more (or fewer) arguments than the statement's parameters is an
    ///   error (`SQLITE_RANGE`); FMDB ignored extra arguments.
    @discardableResult
    public func executeUpdate(_ sql: String, withArgumentsIn arguments: [Any]) -> Bool {
        executeUpdate(sql, arrayArguments: arguments)
    }

    private func executeUpdate(_ sql: String, arrayArguments: [Any]) -> Bool {
        recordingUpdate(sql) { try $0.bind(array: arrayArguments, dateFormatter: dateFormatter) }
    }

    private func executeUpdate(_ sql: String, arrayArguments: [Any?]) -> Bool {
        recordingUpdate(sql) { try $0.bind(array: arrayArguments, dateFormatter: dateFormatter) }
    }

    /// The Bool-returning FMDB shape around `update`.
    private func recordingUpdate(_ sql: String, bind: (Statement) throws -> Void) -> Bool {
        recordingBool { try update(sql, bind: bind) }
    }

    /// Runs one statement that returns no rows; throws on error (Swift's reading of FMDB's
    /// `executeUpdate:values:error:`).
    public func executeUpdate(_ sql: String, values: [Any]?) throws {
        try recording {
            try update(sql) { try $0.bind(array: values ?? [], dateFormatter: dateFormatter) }
        }
    }

    /// Runs one statement with named parameters: key `name` binds `:name` in the SQL.
    @discardableResult
    public func executeUpdate(_ sql: String, withParameterDictionary arguments: [AnyHashable: Any]) -> Bool {
        recordingUpdate(sql) { try $0.bind(dictionary: arguments, dateFormatter: dateFormatter) }
    }

    /// Runs one statement written as an interpolated string; every interpolated value is bound as a
    /// `?` parameter, never pasted into the SQL.
    ///
    /// ```swift
    /// db.executeUpdate(withFormat: "INSERT INTO t VALUES (\(id), \(name))")
    /// ```
    @discardableResult
    public func executeUpdate(withFormat sql: FMSQLFormat) -> Bool {
        executeUpdate(sql.sql, arrayArguments: sql.arguments)
    }

    // MARK: - Queries

    /// Runs a query with positional arguments; iterate the result with `next()`.
    ///
    /// ```swift
    /// if let rs = db.executeQuery("SELECT * FROM t WHERE a > ?", 10) {
    ///     while rs.next() { ... }
    /// }
    /// ```
    /// - Returns: nil on error (see `lastError()`).
    @discardableResult
    public func executeQuery(_ sql: String, _ arguments: Any?...) -> FMResultSet? {
        executeQuery(sql, arrayArguments: arguments)
    }

    /// Runs a query with an array of arguments; nil on error (see `lastError()`).
    ///
    /// - Note: FMDB compatibility: more (or fewer) arguments than the statement's parameters is an
    ///   error (`SQLITE_RANGE`); FMDB ignored extra arguments.
    @discardableResult
    public func executeQuery(_ sql: String, withArgumentsIn arguments: [Any]) -> FMResultSet? {
        executeQuery(sql, arrayArguments: arguments)
    }

    private func executeQuery(_ sql: String, arrayArguments: [Any]) -> FMResultSet? {
        recordingQuery(sql) { try $0.bind(array: arrayArguments, dateFormatter: dateFormatter) }
    }

    private func executeQuery(_ sql: String, arrayArguments: [Any?]) -> FMResultSet? {
        recordingQuery(sql) { try $0.bind(array: arrayArguments, dateFormatter: dateFormatter) }
    }

    /// The optional-returning FMDB shape around `query`.
    private func recordingQuery(_ sql: String, bind: (Statement) throws -> Void) -> FMResultSet? {
        recordingOptional { try query(sql, bind: bind) }
    }

    /// Runs a query; throws on error.
    @discardableResult
    public func executeQuery(_ sql: String, values: [Any]?) throws -> FMResultSet {
        try recording {
            try query(sql) { try $0.bind(array: values ?? [], dateFormatter: dateFormatter) }
        }
    }

    /// Runs a query with named parameters (`:name` in the SQL, `name` in the dictionary).
    @discardableResult
    public func executeQuery(_ sql: String, withParameterDictionary arguments: [AnyHashable: Any]?) -> FMResultSet? {
        recordingQuery(sql) { try $0.bind(dictionary: arguments ?? [:], dateFormatter: dateFormatter) }
    }

    /// Runs a query written as an interpolated string, every value bound as a parameter.
    @discardableResult
    public func executeQuery(withFormat sql: FMSQLFormat) -> FMResultSet? {
        executeQuery(sql.sql, arrayArguments: sql.arguments)
    }

    /// Compiles a statement without binding it, into a reusable result set (FMDB 2.7.8+): bind with
    /// `FMResultSet.bind(withArray:)` or `bind(withDictionary:)`, then call `next()` or `step()`; bind
    /// again to run it again, any number of times, until `close()` (or the database closes). It does not
    /// close itself at the end of its rows, and queue and pool blocks leave it open.
    ///
    /// ```swift
    /// let insert = db.prepare("INSERT INTO t (a, b) VALUES (?, ?)")
    /// for (a, b) in pairs {
    ///     insert?.bind(withArray: [a, b])
    ///     insert?.step()
    /// }
    /// insert?.close()
    /// ```
    @discardableResult
    public func prepare(_ sql: String) -> FMResultSet? {
        recordingOptional {
            let statement = try acquireStatement(sql)
            return FMResultSet(statement: statement, parent: self, isReusable: true)
        }
    }

    // MARK: - Several statements

    /// Runs any number of `;`-separated statements (no arguments).
    @discardableResult
    public func executeStatements(_ sql: String) -> Bool {
        executeStatements(sql, withResultBlock: nil)
    }

    /// Runs `;`-separated statements, calling `block` for every row any of them returns; the block
    /// returns non-zero to stop (the call then fails with SQLITE_ABORT).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/exec.html>
    @discardableResult
    public func executeStatements(_ sql: String, withResultBlock block: FMDBExecuteStatementsCallbackBlock?) -> Bool {
        recordingBool {
            let connection = try requireConnection(sql: sql)
            if traceExecution {
                logger.info("\(loggablePath) executeStatements: \(FMDatabaseError.loggable(sql))")
            }
            try connection.execute(sql, rowHandler: block)
        }
    }

    // MARK: - Misc

    /// The rowid of the last row inserted on this connection.
    public var lastInsertRowId: Int64 { connection?.lastInsertRowID ?? 0 }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int32 { connection?.changes ?? 0 }

    /// Interrupts a running statement (from another thread). Returns false when not open.
    @discardableResult
    public func interrupt() -> Bool {
        guard let connection else { return false }
        connection.interrupt()
        return true
    }

    /// Sets a run-time limit (`SQLITE_LIMIT_...`); returns the previous value. -1 reads only.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/limit.html>
    @discardableResult
    public func limit(for type: Int32, value newLimit: Int32) -> Int32 {
        connection?.limit(type, value: newLimit) ?? -1
    }

    /// Whether the linked SQLite was built thread-safe.
    public static func isSQLiteThreadSafe() -> Bool {
        SQLiteLibrary.isThreadSafe
    }

    /// SQLite's version, e.g. "3.15.2".
    public static func sqliteLibVersion() -> String {
        SQLiteLibrary.version
    }

    /// The FMDB API level this library implements.
    public static func fmdbUserVersion() -> String {
        "2.7.12"
    }

}

@available(*, unavailable)
extension FMDatabase: Sendable {}
