import Foundation

/// The rows of a query: FMDB's `FMResultSet`.
///
/// ```swift
/// let rs = try db.executeQuery("SELECT id, name FROM people WHERE age > ?", values: [30])
/// while rs.next() {
///     let id = rs.long(forColumn: "id")
///     let name = rs.string(forColumnIndex: 1)
/// }
/// ```
///
/// A result set from `executeQuery` is closed when `next()` returns false, when its database closes, or
/// on deinit. One from `FMDatabase.prepare(_:)` is reusable (FMDB 2.7.8+): it stays open at the end of
/// its rows, and `bind(withArray:)` / `bind(withDictionary:)` reset it to run again, until `close()`.
/// Getters on a closed set, on NULL, or on an unknown column return 0 / false / nil; they never crash.
/// Not Sendable.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/column_blob.html>
///
/// - Note: FMDB compatibility: `final`; `columnNameToIndexMap` is a Swift dictionary, and there is no
///   key-value coding (`kvcMagic`): Linux has no Objective-C runtime.
public final class FMResultSet {
    /// The database this result set reads from (nil once closed).
    public private(set) var parentDB: FMDatabase?
    private var statement: Statement?
    private var lastStepCode: Int32 = SQLITE_OK
    /// The current row's column count, read once per row (not once per getter).
    private var rowColumnCount: Int32 = 0
    /// Made by `FMDatabase.prepare(_:)`: stays open at the end of its rows, to be bound and run again.
    let isReusable: Bool

    init(statement: Statement, parent: FMDatabase, isReusable: Bool = false) {
        self.statement = statement
        self.parentDB = parent
        self.isReusable = isReusable
        parent.resultSetDidOpen(self)
    }

    deinit {
        close()
    }

    /// The SQL of the query.
    public var query: String? { statement?.sql }

    /// The number of columns of the result.
    public var columnCount: Int32 { statement?.columnCount ?? 0 }

    /// Lowercased column names to indexes. Built once per statement.
    public var columnNameToIndexMap: [String: Int32] { statement?.columnNameToIndexMap ?? [:] }

    /// Closes the result set: its statement is reset for reuse (cached) or finalized.
    public func close() {
        guard let statement else { return }
        self.statement = nil
        rowColumnCount = 0
        parentDB?.releaseStatement(statement)
        parentDB?.resultSetDidClose(self)
        parentDB = nil
    }

    // MARK: - Stepping

    /// Moves to the next row. False at the end (the set then closes, unless it came from `prepare`) or
    /// on error (see the database's `lastError()`).
    @discardableResult
    public func next() -> Bool {
        (try? internalStep()) == SQLITE_ROW
    }

    /// Moves to the next row; throws on error, and with code 21 (SQLITE_MISUSE) on a closed or
    /// exhausted set.
    @discardableResult
    public func nextWithError() throws -> Bool {
        try internalStep() == SQLITE_ROW
    }

    /// Runs the statement one step; true when it completed (SQLITE_DONE), as FMDB's `step`.
    @discardableResult
    public func step() -> Bool {
        (try? internalStep()) == SQLITE_DONE
    }

    /// Runs `body` through the parent database's one error-recording path; a closed set has no parent
    /// left to record on.
    @inline(__always)
    private func recording<T>(_ body: () throws -> T) throws -> T {
        guard let parent = parentDB else { return try body() }
        return try parent.recording(body)
    }

    private func internalStep() throws -> Int32 {
        try recording {
            guard let statement, !statement.isFinalized else {
                throw FMDatabaseError.misuse("The result set is closed or exhausted.", sql: query)
            }
            let rc = statement.step()
            lastStepCode = rc
            if rc == SQLITE_ROW {
                rowColumnCount = statement.columnCount
                return rc
            }
            rowColumnCount = 0
            if rc == SQLITE_DONE {
                // A reusable set keeps its statement; the next bind resets it.
                if !isReusable { close() }
                return rc
            }
            let error = statement.connection.error(code: rc, sql: statement.sql)
            if isReusable { statement.reset() } else { close() }
            throw error
        }
    }

    /// Whether the last `next()` produced a row.
    @discardableResult
    public func hasAnotherRow() -> Bool {
        statement != nil && lastStepCode == SQLITE_ROW
    }

    // MARK: - Binding (after `FMDatabase.prepare`)

    /// Binds positional values to a prepared statement (resetting it first).
    @discardableResult
    public func bind(withArray array: [Any]) -> Bool {
        bind { try $0.bind(array: array, dateFormatter: parentDB?.dateFormatter) }
    }

    /// Binds named values (`:name` in the SQL, `name` in the dictionary).
    @discardableResult
    public func bind(withDictionary dictionary: [AnyHashable: Any]) -> Bool {
        bind { try $0.bind(dictionary: dictionary, dateFormatter: parentDB?.dateFormatter) }
    }

    private func bind(_ body: (Statement) throws -> Void) -> Bool {
        do {
            try recording {
                guard let statement, !statement.isFinalized else {
                    throw FMDatabaseError.misuse("The result set is closed.", sql: query)
                }
                statement.reset()
                statement.clearBindings()
                lastStepCode = SQLITE_OK
                rowColumnCount = 0
                try body(statement)
            }
            return true
        } catch {
            return false
        }
    }

    // MARK: - Columns

    /// The index of a column, case-insensitively; -1 when absent.
    @discardableResult
    public func columnIndex(forName columnName: String) -> Int32 {
        guard let statement else { return -1 }
        let index = statement.columnIndex(forName: columnName)
        if index < 0 {
            parentDB?.logger.warning("Warning: I could not find the column named '\(columnName)'.")
        }
        return index
    }

    /// The name of a column; nil for an unknown index.
    @discardableResult
    public func columnName(for columnIdx: Int32) -> String? {
        statement?.columnName(columnIdx)
    }

    /// The statement when `index` names a column of the current row (before the first row, any
    /// column of the statement: SQLite answers NULL there).
    @inline(__always)
    private func valid(_ index: Int32) -> Statement? {
        guard let statement, index >= 0 else { return nil }
        if index < rowColumnCount { return statement }
        return statement.isValidColumn(index) ? statement : nil
    }

    /// The column as Int32 (SQLite's conversion); 0 for NULL or an unknown column.
    @discardableResult
    public func int(forColumnIndex columnIdx: Int32) -> Int32 {
        valid(columnIdx)?.int32(at: columnIdx) ?? 0
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func int(forColumn columnName: String) -> Int32 {
        int(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as Int; 0 for NULL or an unknown column.
    @discardableResult
    public func long(forColumnIndex columnIdx: Int32) -> Int {
        Int(truncatingIfNeeded: valid(columnIdx)?.int64(at: columnIdx) ?? 0)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func long(forColumn columnName: String) -> Int {
        long(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as Int64; 0 for NULL or an unknown column.
    @discardableResult
    public func longLongInt(forColumnIndex columnIdx: Int32) -> Int64 {
        valid(columnIdx)?.int64(at: columnIdx) ?? 0
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func longLongInt(forColumn columnName: String) -> Int64 {
        longLongInt(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as UInt64: the bit pattern of the stored 64-bit integer, as FMDB.
    @discardableResult
    public func unsignedLongLongInt(forColumnIndex columnIdx: Int32) -> UInt64 {
        UInt64(bitPattern: longLongInt(forColumnIndex: columnIdx))
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func unsignedLongLongInt(forColumn columnName: String) -> UInt64 {
        unsignedLongLongInt(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as Bool (non-zero is true); false for NULL or an unknown column.
    @discardableResult
    public func bool(forColumnIndex columnIdx: Int32) -> Bool {
        int(forColumnIndex: columnIdx) != 0
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func bool(forColumn columnName: String) -> Bool {
        bool(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as Double; 0 for NULL or an unknown column.
    @discardableResult
    public func double(forColumnIndex columnIdx: Int32) -> Double {
        valid(columnIdx)?.double(at: columnIdx) ?? 0
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func double(forColumn columnName: String) -> Double {
        double(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as text; nil for NULL or an unknown column.
    @discardableResult
    public func string(forColumnIndex columnIdx: Int32) -> String? {
        guard let statement = valid(columnIdx), statement.columnType(columnIdx) != SQLITE_NULL else { return nil }
        return statement.string(at: columnIdx)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func string(forColumn columnName: String) -> String? {
        string(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as a date: parsed with the database's date formatter when one is set, else read
    /// as seconds since 1970. nil for NULL.
    @discardableResult
    public func date(forColumnIndex columnIdx: Int32) -> Date? {
        guard let statement = valid(columnIdx), statement.columnType(columnIdx) != SQLITE_NULL else { return nil }
        if let formatter = parentDB?.dateFormatter {
            guard let text = statement.string(at: columnIdx) else { return nil }
            return formatter.date(from: text)
        }
        return Date(timeIntervalSince1970: statement.double(at: columnIdx))
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func date(forColumn columnName: String) -> Date? {
        date(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column's bytes, copied; nil for NULL and for a zero-length BLOB, as FMDB.
    @discardableResult
    public func data(forColumnIndex columnIdx: Int32) -> Data? {
        valid(columnIdx)?.data(at: columnIdx)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func data(forColumn columnName: String) -> Data? {
        data(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column's bytes without a copy: valid only until the next `next()`, or the set closes.
    @discardableResult
    public func dataNoCopy(forColumnIndex columnIdx: Int32) -> Data? {
        valid(columnIdx)?.dataNoCopy(at: columnIdx)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func dataNoCopy(forColumn columnName: String) -> Data? {
        dataNoCopy(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column's UTF-8 text, owned by SQLite: valid until the next `next()` or close.
    @discardableResult
    public func utf8String(forColumnIndex columnIdx: Int32) -> UnsafePointer<UInt8>? {
        guard let statement = valid(columnIdx), statement.columnType(columnIdx) != SQLITE_NULL else { return nil }
        return statement.utf8Pointer(at: columnIdx)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func utf8String(forColumn columnName: String) -> UnsafePointer<UInt8>? {
        utf8String(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as FMDB's object: INTEGER → NSNumber (Int64), FLOAT → NSNumber (Double),
    /// TEXT → String, BLOB → Data, NULL (and a zero-length BLOB) → NSNull; nil for an unknown column.
    @discardableResult
    public func object(forColumnIndex columnIdx: Int32) -> Any? {
        guard let statement = valid(columnIdx) else { return nil }
        switch statement.columnType(columnIdx) {
        case SQLITE_INTEGER: return NSNumber(value: statement.int64(at: columnIdx))
        case SQLITE_FLOAT: return NSNumber(value: statement.double(at: columnIdx))
        case SQLITE_BLOB: return statement.data(at: columnIdx) ?? NSNull()
        case SQLITE_TEXT: return statement.string(at: columnIdx) ?? NSNull()
        default: return NSNull()
        }
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func object(forColumn columnName: String) -> Any? {
        object(forColumnIndex: columnIndex(forName: columnName))
    }

    /// `object(forColumnIndex:)`.
    public subscript(columnIdx: Int32) -> Any? { object(forColumnIndex: columnIdx) }
    /// `object(forColumn:)`.
    public subscript(columnName: String) -> Any? { object(forColumn: columnName) }

    /// The storage class of a column in the current row (`.null` for an unknown column).
    @discardableResult
    public func type(forColumnIndex columnIdx: Int32) -> SqliteValueType {
        guard let statement = valid(columnIdx) else { return .null }
        return SqliteValueType(rawValue: statement.columnType(columnIdx)) ?? .null
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func type(forColumn columnName: String) -> SqliteValueType {
        type(forColumnIndex: columnIndex(forName: columnName))
    }

    /// Whether a column is NULL (true for an unknown column).
    @discardableResult
    public func columnIndexIsNull(_ columnIdx: Int32) -> Bool {
        guard let statement = valid(columnIdx) else { return true }
        return statement.columnType(columnIdx) == SQLITE_NULL
    }

    /// Whether the column named `columnName` is NULL (true when absent).
    @discardableResult
    public func columnIsNull(_ columnName: String) -> Bool {
        columnIndexIsNull(columnIndex(forName: columnName))
    }

    /// The current row: column name to `object(forColumnIndex:)`; nil on a closed set and, as FMDB's
    /// (`sqlite3_data_count` is 0), when there is no current row: before the first `next()`, after a bind.
    public var resultDictionary: [AnyHashable: Any]? {
        guard let statement else { return nil }
        guard rowColumnCount > 0 else {
            parentDB?.logger.warning("Warning: There seem to be no columns in this set.")
            return nil
        }
        let count = statement.columnCount
        var row: [AnyHashable: Any] = [:]
        row.reserveCapacity(Int(count))
        for index in 0..<count {
            guard let name = statement.columnName(index) else { continue }
            row[name] = object(forColumnIndex: index) ?? NSNull()
        }
        return row
    }

    // MARK: - Internal fast access

    var currentStatement: Statement? { statement }
}

@available(*, unavailable)
extension FMResultSet: Sendable {}
