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
    public var parentDB: FMDatabase? { parent }
    /// Private storage, so reading it on every step needs no dynamic exclusivity check (a public
    /// stored property gets one: `swift_beginAccess`, ~76 instructions by callgrind).
    private var parent: FMDatabase?
    private var statement: Statement?
    /// `statement`'s `sqlite3_stmt` while the set is open, nil once closed: the getters read columns
    /// through it without retaining the statement. Valid while set: the statement is finalized only
    /// by this set's `close()`, and the database closes its open sets before its connection.
    private var handle: OpaquePointer?
    /// `statement`'s connection, which every step goes through (it refuses a step on a transaction SQLite
    /// rolled back: Connection+TransactionForms.swift).
    private let connection: Connection
    private var lastStepCode: Int32 = SQLITE_OK
    /// The current row's column count, read once per row (not once per getter).
    private var rowColumnCount: Int32 = 0
    /// The statement's column-name representations (owned by the statement), fetched at the first
    /// lookup by name on a row, and kept for the rest of the run (SQLite may prepare the statement again,
    /// with other columns, only at a run's first step); empty when lookups must compare strings (see
    /// `columnIndex(forName:)`).
    private var nameTable = UnsafeBufferPointer<StringRepresentation>(start: nil, count: 0)
    private var nameTableFetched = false
    /// Made by `FMDatabase.prepare(_:)`: stays open at the end of its rows, to be bound and run again.
    let isReusable: Bool
    /// The neighbours in the parent database's list of open result sets (an intrusive list: opening
    /// and closing a set allocates nothing and hashes nothing). Only `FMDatabase` touches them; a set
    /// unlinks itself in `close()`, which `deinit` calls, so a link never outlives its target.
    unowned(unsafe) var previousOpen: FMResultSet?
    unowned(unsafe) var nextOpen: FMResultSet?

    init(statement: Statement, parent: FMDatabase, isReusable: Bool = false) {
        self.statement = statement
        self.handle = statement.handle
        self.connection = statement.connection
        self.parent = parent
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
        handle = nil
        rowColumnCount = 0
        forgetColumnLookups()
        parent?.releaseStatement(statement)
        parent?.resultSetDidClose(self)
        parent = nil
    }

    // MARK: - Stepping

    /// Moves to the next row. False at the end (the set then closes, unless it came from `prepare`) or
    /// on error (see the database's `lastError()`).
    @discardableResult
    public func next() -> Bool {
        do {
            return try internalStep() == SQLITE_ROW
        } catch {
            parent?.logError(error)
            return false
        }
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
        do {
            return try internalStep() == SQLITE_DONE
        } catch {
            parent?.logError(error)
            return false
        }
    }

    /// Runs `body` through the parent database's one error-recording path; a closed set has no parent
    /// left to record on.
    @inline(__always)
    private func recording<T>(_ body: () throws -> T) throws -> T {
        guard let parent else { return try body() }
        return try parent.recording(body)
    }

    /// One step. The row case is the hot path of every scan: it clears the parent's last error (as
    /// `recording` does) and reads the row's column count, nothing else; the other outcomes go through
    /// the recording path.
    @inline(__always)
    private func internalStep() throws -> Int32 {
        if let handle {
            parent?.clearLastError()
            let rc = ColumnAccess.step(handle, on: connection)
            lastStepCode = rc
            if rc == SQLITE_ROW {
                rowColumnCount = ColumnAccess.count(handle)
                return rc
            }
            return try finishStep(rc)
        }
        return try recording {
            throw FMDatabaseError.misuse("The result set is closed or exhausted.", sql: query)
        }
    }

    /// The end of the rows or an error: closes the set (unless reusable), records an error.
    private func finishStep(_ rc: Int32) throws -> Int32 {
        try recording {
            guard let statement else {
                throw FMDatabaseError.misuse("The result set is closed or exhausted.", sql: query)
            }
            rowColumnCount = 0
            if rc == SQLITE_DONE {
                endRun(statement)
                return rc
            }
            let error = statement.connection.error(code: rc, sql: statement.sql)
            endRun(statement)
            throw error
        }
    }

    /// The run is over: a set closes, unless reusable; a reusable one keeps its statement, reset, and forgets
    /// its look-ups by name, since its next run (after a bind, or a `next()` that runs it again) may have other
    /// columns.
    private func endRun(_ statement: Statement) {
        guard isReusable else { return close() }
        statement.reset()
        forgetColumnLookups()
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
        bind { try $0.bind(array: array, dateFormatter: parent?.dateFormatter) }
    }

    /// Binds named values (`:name` in the SQL, `name` in the dictionary).
    @discardableResult
    public func bind(withDictionary dictionary: [AnyHashable: Any]) -> Bool {
        bind { try $0.bind(dictionary: dictionary, dateFormatter: parent?.dateFormatter) }
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
                forgetColumnLookups()
                try body(statement)
            }
            return true
        } catch {
            parent?.logError(error)
            return false
        }
    }

    // MARK: - Columns

    /// The index of a column, case-insensitively; -1 when absent.
    @discardableResult
    public func columnIndex(forName columnName: String) -> Int32 {
        // The common case, a literal or short name spelled as in the query: found by its in-memory
        // representation in the statement's table (see `Statement.columnIndex(forName:)`), without
        // retaining the statement. The table is only handed out when no two names are equal once
        // lowercased, so at most one entry can match.
        if !nameTable.isEmpty {
            let key = StringRepresentation(columnName)
            var position = 0
            while position < nameTable.count {
                if nameTable[position] == key { return Int32(truncatingIfNeeded: position) }
                position += 1
            }
        }
        return columnIndexComparingNames(columnName)
    }

    /// Forgets what this run looked up by name: the next run may have other columns (SQLite prepares the
    /// statement again after a schema change), so names are looked up again, and the row decoder resolves
    /// them again.
    private func forgetColumnLookups() {
        nameTable = UnsafeBufferPointer(start: nil, count: 0)
        nameTableFetched = false
        rowDecoder?.retire()
        rowDecoder = nil
    }

    private func columnIndexComparingNames(_ columnName: String) -> Int32 {
        guard let statement else { return -1 }
        // Only on a row: before the run's first step, that step may still prepare the statement again.
        if !nameTableFetched, lastStepCode == SQLITE_ROW {
            nameTableFetched = true
            if let table = statement.columnNameRepresentationTable() {
                nameTable = table
                return columnIndex(forName: columnName)
            }
        }
        let index = statement.columnIndex(forName: columnName)
        if index < 0 {
            parent?.logger.warning("Warning: I could not find the column named '\(columnName)'.")
        }
        return index
    }

    /// The name of a column; nil for an unknown index.
    @discardableResult
    public func columnName(for columnIdx: Int32) -> String? {
        statement?.columnName(columnIdx)
    }

    /// The statement handle when `index` names a column of the current row (before the first row,
    /// any column of the statement: SQLite answers NULL there); nil on a closed set.
    @inline(__always)
    private func valid(_ index: Int32) -> OpaquePointer? {
        guard let handle else { return nil }
        // One unsigned compare covers both bounds (a negative index is a huge UInt32).
        if UInt32(bitPattern: index) < UInt32(bitPattern: rowColumnCount) { return handle }
        return index >= 0 && index < ColumnAccess.count(handle) ? handle : nil
    }

    /// The column as Int32 (SQLite's conversion); 0 for NULL or an unknown column.
    @discardableResult
    public func int(forColumnIndex columnIdx: Int32) -> Int32 {
        valid(columnIdx).map { ColumnAccess.int32($0, columnIdx) } ?? 0
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func int(forColumn columnName: String) -> Int32 {
        int(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as Int; 0 for NULL or an unknown column.
    @discardableResult
    public func long(forColumnIndex columnIdx: Int32) -> Int {
        Int(truncatingIfNeeded: valid(columnIdx).map { ColumnAccess.int64($0, columnIdx) } ?? 0)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func long(forColumn columnName: String) -> Int {
        long(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as Int64; 0 for NULL or an unknown column.
    @discardableResult
    public func longLongInt(forColumnIndex columnIdx: Int32) -> Int64 {
        valid(columnIdx).map { ColumnAccess.int64($0, columnIdx) } ?? 0
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
        valid(columnIdx).map { ColumnAccess.double($0, columnIdx) } ?? 0
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func double(forColumn columnName: String) -> Double {
        double(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column as text; nil for NULL or an unknown column.
    @discardableResult
    public func string(forColumnIndex columnIdx: Int32) -> String? {
        guard let handle = valid(columnIdx) else { return nil }
        return ColumnAccess.string(handle, columnIdx)
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
        guard let handle = valid(columnIdx), ColumnAccess.type(handle, columnIdx) != SQLITE_NULL else { return nil }
        if let formatter = parent?.dateFormatter {
            guard let text = ColumnAccess.string(handle, columnIdx) else { return nil }
            return formatter.date(from: text)
        }
        return Date(timeIntervalSince1970: ColumnAccess.double(handle, columnIdx))
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func date(forColumn columnName: String) -> Date? {
        date(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column's bytes, copied; nil for NULL and for a zero-length BLOB, as FMDB.
    @discardableResult
    public func data(forColumnIndex columnIdx: Int32) -> Data? {
        valid(columnIdx).flatMap { ColumnAccess.data($0, columnIdx) }
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func data(forColumn columnName: String) -> Data? {
        data(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column's bytes without a copy: valid only until the next `next()`, or the set closes.
    @discardableResult
    public func dataNoCopy(forColumnIndex columnIdx: Int32) -> Data? {
        guard valid(columnIdx) != nil else { return nil }
        return statement?.dataNoCopy(at: columnIdx)
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func dataNoCopy(forColumn columnName: String) -> Data? {
        dataNoCopy(forColumnIndex: columnIndex(forName: columnName))
    }

    /// The column's UTF-8 text, owned by SQLite: valid until the next `next()` or close.
    @discardableResult
    public func utf8String(forColumnIndex columnIdx: Int32) -> UnsafePointer<UInt8>? {
        guard let handle = valid(columnIdx), ColumnAccess.type(handle, columnIdx) != SQLITE_NULL else { return nil }
        return ColumnAccess.utf8Pointer(handle, columnIdx)
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
        guard let handle = valid(columnIdx) else { return nil }
        switch ColumnAccess.type(handle, columnIdx) {
        case SQLITE_INTEGER: return NSNumber(value: ColumnAccess.int64(handle, columnIdx))
        case SQLITE_FLOAT: return NSNumber(value: ColumnAccess.double(handle, columnIdx))
        case SQLITE_BLOB: return ColumnAccess.data(handle, columnIdx) ?? NSNull()
        case SQLITE_TEXT: return ColumnAccess.string(handle, columnIdx) ?? NSNull()
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
        guard let handle = valid(columnIdx) else { return .null }
        return SqliteValueType(rawValue: ColumnAccess.type(handle, columnIdx)) ?? .null
    }

    /// The same, for the column named `columnName` (case-insensitive).
    @discardableResult
    public func type(forColumn columnName: String) -> SqliteValueType {
        type(forColumnIndex: columnIndex(forName: columnName))
    }

    /// Whether a column is NULL (true for an unknown column).
    @discardableResult
    public func columnIndexIsNull(_ columnIdx: Int32) -> Bool {
        guard let handle = valid(columnIdx) else { return true }
        return ColumnAccess.type(handle, columnIdx) == SQLITE_NULL
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
            parent?.logger.warning("Warning: There seem to be no columns in this set.")
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

    /// The statement handle while a row is current (after a `next()` that returned true); nil before the
    /// first row, at the end, and once closed. The row decoder (`RowDecoder`) reads columns through it.
    var currentRowHandle: OpaquePointer? { rowColumnCount > 0 ? handle : nil }

    /// The row decoder, kept across rows so column names are resolved once per run of the statement
    /// (`RowDecoder`); dropped on close and on a new bind.
    var rowDecoder: RowDecoder?
}

@available(*, unavailable)
extension FMResultSet: Sendable {}
