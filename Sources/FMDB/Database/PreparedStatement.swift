import Foundation

/// A compiled statement that binds typed values and reads columns straight from `sqlite3_column_*`:
/// the library's fastest API, beside FMDB's `[Any]`-based one. Swift-native addition.
///
/// ```swift
/// let insert = try db.prepareStatement("INSERT INTO t (id, name, score) VALUES (?, ?, ?)")
/// try insert.execute(1, "Ada", 9.5)
///
/// let lookup = try db.prepareStatement("SELECT name, score FROM t WHERE id = ?")
/// try lookup.bind(1)
/// while try lookup.step() {
///     print(lookup.string(at: 0) ?? "", lookup.double(at: 1))
/// }
/// ```
///
/// Arguments are bound through parameter packs, so `execute(1, "x", 2.5)` binds each value with its own
/// type's code: no boxing in `Any`, no cast chain. The statement stays compiled until it is released
/// or its database closes (after which every call throws SQLITE_MISUSE). Not Sendable.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/stmt.html>
public final class PreparedStatement {
    let statement: Statement
    /// Errors are also recorded here, for `lastError()`, as the FMDB API's are.
    private weak var database: FMDatabase?

    init(statement: Statement, database: FMDatabase) {
        self.statement = statement
        self.database = database
    }

    /// Runs `body` through the database's one error-recording path (for `lastError()`), as the FMDB
    /// API's entry points do; without a database (released), just runs it.
    @inline(__always)
    private func recording<T>(_ body: () throws -> T) throws -> T {
        guard let database else { return try body() }
        return try database.recording(body)
    }

    /// The date format of its database (``FMDatabase/setDateFormat(_:)``), which `Date` binds through.
    var dateFormatter: DateFormatter? { database?.dateFormatter }

    /// The SQL it was compiled from.
    public var sql: String { statement.sql }

    /// The number of `?` / named parameters.
    public var parameterCount: Int32 { statement.parameterCount }
    /// The number of columns of the result.
    public var columnCount: Int32 { statement.columnCount }

    /// The name of a result column; nil for an unknown index.
    public func columnName(at index: Int32) -> String? { statement.columnName(index) }

    /// The index of a column, case-insensitively; -1 when absent. Built once per statement.
    public func columnIndex(named name: String) -> Int32 { statement.columnIndex(forName: name) }

    // MARK: - Binding

    /// Resets the statement and binds `values` to parameters 1...n (the count must match).
    public func bind<each V: SQLiteBindable>(_ values: repeat each V) throws {
        try recording { try bindValues(repeat each values) }
    }

    /// Resets the statement and binds `values` to parameters 1...n: the one typed binder, also used by
    /// `FMDatabase.execute(_:_:)` and `query(_:_:)`.
    func bindValues<each V: SQLiteBindable>(_ values: repeat each V) throws {
        guard !statement.isFinalized else {
            throw FMDatabaseError.misuse("The statement's database is closed.", sql: sql)
        }
        statement.reset()
        var index: Int32 = 0
        for value in repeat each values {
            index += 1
            let rc = value.bind(to: self, at: index)
            if rc != SQLITE_OK { throw statement.connection.error(code: rc, sql: sql) }
        }
        guard index == statement.parameterCount else {
            statement.clearBindings()
            throw FMDatabaseError.bindCount(expected: statement.parameterCount, got: Int(index), sql: sql)
        }
    }

    /// Binds `values` and runs the statement to completion (INSERT, UPDATE, DELETE, DDL).
    public func execute<each V: SQLiteBindable>(_ values: repeat each V) throws {
        try recording {
            try bindValues(repeat each values)
            let rc = statement.step()
            guard !statement.isFinalized else { throw FMDatabaseError.misuse("The statement is finalized.", sql: sql) }
            let error = rc != SQLITE_DONE && rc != SQLITE_ROW ? statement.connection.error(code: rc, sql: sql) : nil
            statement.reset()
            if let error { throw error }
        }
    }

    /// Moves to the next row: true with a row, false when done (the statement then resets itself).
    ///
    /// The fast path: a row is returned without touching the database's error slot (a row is not an
    /// error, and this runs once per row); an error goes through the one recording path.
    @inline(__always)
    public func step() throws -> Bool {
        let rc = statement.step()
        if rc == SQLITE_ROW { return true }
        return try recording {
            if rc == SQLITE_DONE {
                statement.reset()
                return false
            }
            let error = statement.connection.error(code: rc, sql: sql)
            statement.reset()
            throw error
        }
    }

    /// Resets the statement so it can run again (bindings stay).
    public func reset() {
        statement.reset()
    }

    // MARK: - Low-level binders (for SQLiteBindable conformances)

    /// Binds NULL to parameter `index` (1-based), as `sqlite3_bind_null`.
    ///
    /// For ``SQLiteBindable`` conformances of your own types; ``bind(_:)`` and ``execute(_:)`` call them.
    ///
    /// ```swift
    /// struct Nothing: SQLiteBindable {
    ///     func bind(to statement: PreparedStatement, at index: Int32) -> Int32 { statement.bindNull(at: index) }
    /// }
    /// ```
    ///
    /// - Returns: SQLite's result code: `SQLITE_OK`, or `SQLITE_RANGE` for an index out of range.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/bind_blob.html>
    @inline(__always) public func bindNull(at index: Int32) -> Int32 { statement.bindNull(at: index) }
    /// Binds a 64-bit integer to parameter `index` (1-based), as `sqlite3_bind_int64`.
    ///
    /// ```swift
    /// struct UserID: SQLiteBindable {
    ///     let raw: Int64
    ///     func bind(to statement: PreparedStatement, at index: Int32) -> Int32 { statement.bindInt64(raw, at: index) }
    /// }
    /// ```
    ///
    /// - Returns: SQLite's result code (`SQLITE_OK` on success).
    @inline(__always) public func bindInt64(_ value: Int64, at index: Int32) -> Int32 {
        statement.bind(value, at: index)
    }
    /// Binds a REAL to parameter `index` (1-based), as `sqlite3_bind_double`.
    ///
    /// ```swift
    /// struct Celsius: SQLiteBindable {
    ///     let degrees: Double
    ///     func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
    ///         statement.bindDouble(degrees, at: index)
    ///     }
    /// }
    /// ```
    ///
    /// - Returns: SQLite's result code (`SQLITE_OK` on success).
    @inline(__always) public func bindDouble(_ value: Double, at index: Int32) -> Int32 {
        statement.bind(value, at: index)
    }
    /// Binds TEXT (the string's UTF-8, copied by SQLite) to parameter `index` (1-based), as `sqlite3_bind_text`.
    ///
    /// ```swift
    /// struct Email: SQLiteBindable {
    ///     let address: String
    ///     func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
    ///         statement.bindText(address, at: index)
    ///     }
    /// }
    /// ```
    ///
    /// - Returns: SQLite's result code (`SQLITE_OK` on success).
    @inline(__always) public func bindText(_ value: String, at index: Int32) -> Int32 {
        statement.bind(value, at: index)
    }
    /// Binds a BLOB (the bytes, copied by SQLite) to parameter `index` (1-based), as `sqlite3_bind_blob`.
    ///
    /// An empty buffer binds a zero-length BLOB, not NULL.
    ///
    /// ```swift
    /// struct Digest: SQLiteBindable {
    ///     let bytes: [UInt8]
    ///     func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
    ///         bytes.withUnsafeBytes { statement.bindBlob($0, at: index) }
    ///     }
    /// }
    /// ```
    ///
    /// - Returns: SQLite's result code (`SQLITE_OK` on success).
    @inline(__always) public func bindBlob(_ bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        statement.bind(bytes: bytes, at: index)
    }

    // MARK: - Columns of the current row (no range check beyond SQLite's own)

    /// Whether column `index` (0-based) of the current row is NULL.
    ///
    /// ```swift
    /// while try lookup.step() {
    ///     let age: Int? = lookup.isNull(at: 1) ? nil : lookup.int(at: 1)
    /// }
    /// ```
    @inline(__always) public func isNull(at index: Int32) -> Bool { statement.columnType(index) == SQLITE_NULL }
    /// Column `index` (0-based) of the current row as a 64-bit integer (`sqlite3_column_int64`; NULL is 0).
    ///
    /// ```swift
    /// while try lookup.step() { total += lookup.int64(at: 0) }
    /// ```
    @inline(__always) public func int64(at index: Int32) -> Int64 { statement.int64(at: index) }
    /// Column `index` (0-based) of the current row as an `Int` (`sqlite3_column_int64`; NULL is 0).
    ///
    /// ```swift
    /// while try lookup.step() { print(lookup.int(at: 1)) }
    /// ```
    @inline(__always) public func int(at index: Int32) -> Int { Int(truncatingIfNeeded: statement.int64(at: index)) }
    /// Column `index` (0-based) of the current row as a `Double` (`sqlite3_column_double`; NULL is 0).
    ///
    /// ```swift
    /// while try lookup.step() { print(lookup.double(at: 1)) }
    /// ```
    @inline(__always) public func double(at index: Int32) -> Double { statement.double(at: index) }
    /// Column `index` (0-based) of the current row as text (`sqlite3_column_text`); nil for NULL.
    ///
    /// ```swift
    /// while try lookup.step() { print(lookup.string(at: 0) ?? "(null)") }
    /// ```
    @inline(__always) public func string(at index: Int32) -> String? { statement.string(at: index) }
    /// The column's size in bytes (`sqlite3_column_bytes`), without reading it.
    @inline(__always) public func byteCount(at index: Int32) -> Int { statement.byteCount(at: index) }
    /// The column's bytes, copied; nil for NULL (a zero-length BLOB gives empty Data).
    @inline(__always) public func data(at index: Int32) -> Data? {
        statement.withUnsafeBytes(at: index) { $0.map { Data($0) } }
    }
    /// Calls `body` with the column's bytes in place, valid only inside `body`; nil for NULL.
    @inline(__always) public func withUnsafeBytes<R>(at index: Int32, _ body: (UnsafeRawBufferPointer?) throws -> R)
        rethrows -> R
    {
        try statement.withUnsafeBytes(at: index, body)
    }
}

@available(*, unavailable)
extension PreparedStatement: Sendable {}

extension FMDatabase {
    /// Compiles `sql` into a `PreparedStatement` for the typed fast path.
    /// - Throws: `FMDatabaseError` for SQL that does not compile or a closed database.
    public func prepareStatement(_ sql: String) throws -> PreparedStatement {
        try recording {
            if traceExecution {
                logger.info("\(loggablePath) prepareStatement: \(FMDatabaseError.loggable(sql))")
            }
            return PreparedStatement(statement: try requireConnection(sql: sql).prepare(sql), database: self)
        }
    }
}
