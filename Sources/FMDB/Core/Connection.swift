import CSQLCipher
import Foundation

/// One `sqlite3*` handle: the only owner that closes it.
///
/// Not Sendable: a connection is used by one thread at a time (its `FMDatabase`, or the queue or pool
/// that serializes access to it).
final class Connection {
    private(set) var handle: OpaquePointer?
    /// Set by the keyed-connection authorizer when it refused a statement, so the error can say why.
    let authorizerState = AuthorizerState()

    /// The handle for interrupts from other threads, emptied before the handle is closed.
    let interruptSlot: InterruptSlot

    /// How many of the library's transaction forms (a transaction or savepoint block) are open on this
    /// connection: see Connection+TransactionForms.swift.
    var transactionFormDepth = 0
    /// Set when SQLite ended the transaction of an open form after a statement failed: every statement is
    /// then refused until the outermost form ends. Read at every step, hence `@exclusivity(unchecked)` (a
    /// load, not a dynamic exclusivity check).
    @exclusivity(unchecked) private(set) var isTransactionAborted = false
    /// The failure after which SQLite ended the transaction (set with `isTransactionAborted`).
    private(set) var transactionAbortCause: FMDatabaseError?
    /// Set by the commit hook when something was committed while a form is open (the block's own COMMIT,
    /// and what it ran after it, or the form's COMMIT); cleared when the outermost form ends.
    var committedDuringForm = false

    private init(handle: OpaquePointer) {
        self.handle = handle
        interruptSlot = InterruptSlot(handle)
    }

    deinit {
        // FMDatabase closes explicitly; this is the last line of defence against a leaked handle.
        interruptSlot.clear()
        if let handle { sqlite3_close_v2(handle) }
    }

    var isClosed: Bool { handle == nil }

    /// Opens a connection. A failed open still closes the handle SQLite hands back (see
    /// https://www.sqlite.org/c3ref/open.html: "a database connection handle is usually returned ...
    /// even if an error occurs").
    static func open(path: String, flags: Int32, vfs: String?) throws -> Connection {
        var db: OpaquePointer?
        let rc: Int32
        if let vfs {
            rc = sqlite3_open_v2(path, &db, flags, vfs)
        } else {
            rc = sqlite3_open_v2(path, &db, flags, nil)
        }
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) }
            if let db { sqlite3_close_v2(db) }
            throw FMDatabaseError(code: rc == SQLITE_OK ? SQLITE_NOMEM : rc, message: message)
        }
        let connection = Connection(handle: db)
        connection.installAuthorizer()
        connection.installCommitHook()
        return connection
    }

    /// Closes the handle. Statements the library did not track (made through the C API on
    /// `sqliteHandle`) are finalized first, as FMDB does.
    func close() throws {
        guard let db = handle else { return }
        // No interrupt from another thread may reach the handle from here on (it may be freed below).
        interruptSlot.clear()
        var rc = sqlite3_close(db)
        if rc == SQLITE_BUSY || rc == SQLITE_LOCKED {
            while let stmt = sqlite3_next_stmt(db, nil) {
                sqlite3_finalize(stmt)
            }
            rc = sqlite3_close(db)
        }
        guard rc == SQLITE_OK else {
            throw error(code: rc)
        }
        handle = nil
    }

    // MARK: - Errors

    /// The connection's current error, with SQLite's message when it is about `code`.
    func error(code: Int32? = nil, sql: String? = nil) -> FMDatabaseError {
        guard let db = handle else { return .closed(sql: sql) }
        if code == refusedOnAbortedTransaction, let cause = transactionAbortCause {
            return .refusedOnAbortedTransaction(cause: cause, sql: sql)
        }
        if let refusal = authorizerState.takeRefusal() {
            return FMDatabaseError.refused(refusal, sql: sql)
        }
        let current = sqlite3_extended_errcode(db)
        if let refusal = queryOnlyWriteRefusal(current) {
            return FMDatabaseError.refused(refusal, sql: sql)
        }
        guard let code, (code & 0xFF) != (current & 0xFF) else {
            return FMDatabaseError(code: current, message: String(cString: sqlite3_errmsg(db)), sql: sql)
        }
        return FMDatabaseError(code: code, sql: sql)
    }

    func check(_ rc: Int32, sql: String? = nil) throws {
        if rc != SQLITE_OK { throw error(code: rc, sql: sql) }
    }

    // MARK: - Statements

    /// Calls `body` with `sql` as the C string SQLite reads, refusing text that holds a NUL byte (SQLite would
    /// stop at it and skip the rest without a word). Every SQL string the library hands SQLite passes here
    /// (and scripts through `prepare(_:from:)`); the check is one `strlen` over bytes `withCString` already has,
    /// against the UTF-8 count a native string knows.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/prepare.html> ("If nByte is negative, then
    /// zSql is read up to the first zero terminator.")
    func withSQLText<R>(_ sql: String, _ body: (UnsafePointer<CChar>) throws -> R) throws -> R {
        try sql.withCString { cSQL in
            let length = strlen(cSQL)
            guard length == sql.utf8.count else { throw FMDatabaseError.nulInSQL(at: length, sql: sql) }
            return try body(cSQL)
        }
    }

    func prepare(_ sql: String) throws -> Statement {
        guard let db = handle else { throw FMDatabaseError.closed(sql: sql) }
        try refuseIfTransactionAborted(sql: sql)
        try settlePendingSQLKey()
        var stmt: OpaquePointer?
        authorizerState.sawRowWrite = false
        let rc = try withSQLText(sql) { cSQL in
            sqlite3_prepare_v2(db, cSQL, -1, &stmt, nil)
        }
        guard rc == SQLITE_OK else {
            if let stmt { sqlite3_finalize(stmt) }
            throw error(code: rc, sql: sql)
        }
        guard let stmt else {
            // Only white space or a comment: nothing to run.
            throw FMDatabaseError(code: SQLITE_MISUSE, message: "The SQL contains no statement.", sql: sql)
        }
        try refuseRowWrite(stmt, sql: sql)
        return Statement(connection: self, handle: stmt, sql: sql)
    }

    /// Runs SQL with no arguments and no rows to read, through `sqlite3_exec`.
    func execute(_ sql: String) throws {
        guard let db = handle else { throw FMDatabaseError.closed(sql: sql) }
        try refuseIfTransactionAborted(sql: sql)
        try settlePendingSQLKey()
        var errmsg: UnsafeMutablePointer<CChar>?
        let startedInTransaction = sqlite3_get_autocommit(db) == 0
        let rc = try withSQLText(sql) { sqlite3_exec(db, $0, nil, nil, &errmsg) }
        if rc != SQLITE_OK {
            let message = errmsg.map { String(cString: $0) }
            sqlite3_free(errmsg)
            let error = scriptError(rc, message: message, sql: sql, startedInTransaction: startedInTransaction)
            try settlePendingSQLKey()
            throw error
        }
        // A key PRAGMA among the statements: keyed or not, as SQLCipher says.
        try settlePendingSQLKey()
    }

    /// The first column of the first row of `sql` as text, or nil.
    func pragmaText(_ sql: String) throws -> String? {
        let statement = try prepare(sql)
        defer { statement.finalize() }
        let rc = statement.step()
        if rc == SQLITE_ROW { return statement.string(at: 0) }
        if rc == SQLITE_DONE { return nil }
        throw error(code: rc, sql: sql)
    }

    /// Whether this connection has touched the database file's pages: SQLite's page-cache counters are
    /// non-zero once it has read or written a page (https://www.sqlite.org/c3ref/c_dbstatus_options.html).
    var hasTouchedPages: Bool {
        guard let db = handle else { return false }
        for op in [SQLITE_DBSTATUS_CACHE_HIT, SQLITE_DBSTATUS_CACHE_MISS, SQLITE_DBSTATUS_CACHE_WRITE] {
            var current: Int32 = 0
            var high: Int32 = 0
            if sqlite3_db_status(db, op, &current, &high, 0) == SQLITE_OK, current > 0 { return true }
        }
        return false
    }

    var pagesWritten: Int32 {
        guard let db = handle else { return 0 }
        var current: Int32 = 0
        var high: Int32 = 0
        sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_WRITE, &current, &high, 0)
        return current
    }

    /// The error of an `sqlite3_exec` script that failed with `rc`. A script stopped because SQLite rolled
    /// back a form's transaction while it ran (a statement its row handler or a function ran failed; the
    /// authorizer then refused the script's next statement) is the refusal; otherwise the failed statement
    /// may itself have ended the form's transaction (`noteFailedStatement`: only when the script started
    /// inside it, so that a failure after the block's own ROLLBACK is not taken for SQLite's; a script that
    /// ends the transaction itself and then fails is), and its error is SQLite's.
    private func scriptError(_ rc: Int32, message: String?, sql: String, startedInTransaction: Bool)
        -> FMDatabaseError
    {
        if isTransactionAborted, let cause = transactionAbortCause {
            _ = authorizerState.takeRefusal()
            return .refusedOnAbortedTransaction(cause: cause, sql: sql)
        }
        if transactionFormDepth > 0, startedInTransaction { noteFailedStatement(rc, sql: sql) }
        return execError(message: message, sql: sql)
    }

    /// Marks the transaction of the open forms aborted (Connection+TransactionForms.swift).
    func abortTransaction(cause: FMDatabaseError) {
        transactionAbortCause = cause
        isTransactionAborted = true
        authorizerState.transactionAborted = true
    }

    /// Clears the aborted state, when the outermost form ends.
    func clearTransactionAbort() {
        isTransactionAborted = false
        authorizerState.transactionAborted = false
        transactionAbortCause = nil
        committedDuringForm = false
    }

    var isAutocommit: Bool {
        guard let db = handle else { return true }
        return sqlite3_get_autocommit(db) != 0
    }
}

// MARK: - sqlite3_exec with a row handler

/// Called once per row by `execute(_:rowHandler:)`: column name to value; non-zero stops.
typealias RowHandler = ([AnyHashable: Any]) -> Int32

private final class RowHandlerBox {
    let handler: RowHandler
    init(_ handler: @escaping RowHandler) { self.handler = handler }
}

extension Connection {
    /// Runs `;`-separated SQL through `sqlite3_exec`, calling `rowHandler` for each row.
    func execute(_ sql: String, rowHandler: RowHandler?) throws {
        guard let rowHandler else {
            try execute(sql)
            return
        }
        guard let db = handle else { throw FMDatabaseError.closed(sql: sql) }
        try refuseIfTransactionAborted(sql: sql)
        try settlePendingSQLKey()
        defer {
            // A key PRAGMA among the statements: keyed or not, as SQLCipher says. When it cannot say, the
            // flag stays set (the keyed rules hold) and the next statement asks again.
            _ = try? settlePendingSQLKey()
        }
        try withoutActuallyEscaping(rowHandler) { handler in
            let box = RowHandlerBox(handler)
            var errmsg: UnsafeMutablePointer<CChar>?
            let startedInTransaction = sqlite3_get_autocommit(db) == 0
            let rc = try withSQLText(sql) { cSQL in
                withExtendedLifetime(box) {
                    sqlite3_exec(
                        db, cSQL,
                        { context, columnCount, values, names in
                            guard let context else { return SQLITE_ABORT }
                            let box = Unmanaged<RowHandlerBox>.fromOpaque(context).takeUnretainedValue()
                            var row: [AnyHashable: Any] = [:]
                            for index in 0..<Int(columnCount) {
                                let name = names?[index].map { String(cString: $0) } ?? "\(index)"
                                if let value = values?[index] {
                                    row[name] = String(cString: value)
                                } else {
                                    row[name] = NSNull()
                                }
                            }
                            return box.handler(row)
                        }, Unmanaged.passUnretained(box).toOpaque(), &errmsg)
                }
            }
            if rc != SQLITE_OK {
                let message = errmsg.map { String(cString: $0) }
                sqlite3_free(errmsg)
                throw scriptError(rc, message: message, sql: sql, startedInTransaction: startedInTransaction)
            }
        }
    }
}

extension Connection {
    func checkpoint(
        mode: Int32, name: String?, logFrameCount: UnsafeMutablePointer<Int32>?,
        checkpointCount: UnsafeMutablePointer<Int32>?
    ) throws {
        guard let db = handle else { throw FMDatabaseError.closed() }
        let rc = sqlite3_wal_checkpoint_v2(db, name, mode, logFrameCount, checkpointCount)
        try check(rc)
    }
}

extension Connection {
    /// Prepares the first statement of `bytes[offset...]`; returns it and how many bytes it used, or
    /// nil when only white space and comments are left.
    ///
    /// A NUL byte is refused (SQLITE_MISUSE), as `withSQLText` refuses it: SQLite reads up to the first NUL
    /// even with a byte count. The whole script is searched once (`memchr`), when its first statement is
    /// prepared (offset 0), so no statement of it runs; a later statement still finds a NUL where SQLite stopped.
    func prepare(_ bytes: [UInt8], from offset: Int) throws -> (Statement, Int)? {
        guard let db = handle else { throw FMDatabaseError.closed() }
        try refuseIfTransactionAborted(sql: nil)
        try settlePendingSQLKey()
        var stmt: OpaquePointer?
        var consumed = 0
        var nulOffset: Int?
        authorizerState.sawRowWrite = false
        let rc = bytes.withUnsafeBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return SQLITE_OK }
            if offset == 0, let nul = memchr(base, 0, buffer.count) {
                nulOffset = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(nul))
                return SQLITE_MISUSE
            }
            return base.advanced(by: offset).withMemoryRebound(to: CChar.self, capacity: buffer.count - offset) {
                start in
                var tail: UnsafePointer<CChar>?
                let rc = sqlite3_prepare_v2(db, start, Int32(clamping: buffer.count - offset), &stmt, &tail)
                consumed = tail.map { start.distance(to: $0) } ?? (buffer.count - offset)
                // SQLite stops at a NUL: its tail then points at it.
                if consumed < buffer.count - offset, start[consumed] == 0 { nulOffset = offset + consumed }
                return rc
            }
        }
        if let nulOffset {
            if let stmt { sqlite3_finalize(stmt) }
            throw FMDatabaseError.nulInSQL(at: nulOffset, sql: String(decoding: bytes, as: UTF8.self))
        }
        guard rc == SQLITE_OK else {
            if let stmt { sqlite3_finalize(stmt) }
            let text = String(decoding: bytes[offset...], as: UTF8.self)
            throw error(code: rc, sql: text)
        }
        guard let stmt else { return nil }
        let sql = sqlite3_sql(stmt).map { String(cString: $0) } ?? ""
        try refuseRowWrite(stmt, sql: sql)
        return (Statement(connection: self, handle: stmt, sql: sql), max(consumed, 1))
    }
}

/// `flags` plus `SQLITE_OPEN_NOMUTEX` unless the caller asked for `SQLITE_OPEN_FULLMUTEX`: the queue and
/// the pool hand each connection to one thread at a time, so SQLite's per-call mutex buys nothing.
/// (`sqlite3_interrupt`, the one cross-thread call, needs no mutex.)
func multiThreadFlags(_ flags: Int32) -> Int32 {
    (flags & SQLITE_OPEN_FULLMUTEX) != 0 ? flags : flags | SQLITE_OPEN_NOMUTEX
}
