import Foundation

// Throwing statement calls with typed arguments, in any number (none included). FMDB's throwing forms,
// `executeUpdate(_:values:)` and `executeQuery(_:values:)`, always take `values:`: a default for it would
// make FMDB's own `db.executeUpdate("...")` (the Bool form) need `try`. These take their arguments as a
// parameter pack of `SQLiteBindable` values, bound by `PreparedStatement`'s binder, so a call without
// arguments reads `try db.execute("...")`.
extension FMDatabase {
    /// Runs one statement that returns no rows, its `?` parameters bound to `values` in order; throws on
    /// error. Any number of arguments, none included, each bound by its own type (``SQLiteBindable``): no
    /// `values: nil` and no `[Any]`.
    ///
    /// ```swift
    /// try db.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT)")
    /// try db.execute("INSERT INTO people (id, name, email) VALUES (?, ?, ?)", 1, "Ada", nil as String?)
    /// ```
    ///
    /// Values bind as ``PreparedStatement/bind(_:)`` binds them: an optional's `nil` binds NULL, `Data`
    /// and `[UInt8]` a BLOB, `Bool` 0 or 1, and `Date` seconds since 1970 as REAL, or its text in the
    /// database's date format when one is set (``setDateFormat(_:)``), as ``executeUpdate(_:values:)``.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/bind_blob.html>
    ///
    /// - Parameters:
    ///   - sql: One SQL statement.
    ///   - values: The values of its `?` parameters, as many as it has.
    /// - Throws: ``FMDatabaseError`` with SQLite's code: the statement's error (code 19,
    ///   `SQLITE_CONSTRAINT`, for a violated constraint), code 25 (`SQLITE_RANGE`) when the number of
    ///   values is not the number of parameters, code 21 (`SQLITE_MISUSE`) for SQL that returns rows or a
    ///   closed database. The error is also kept for ``lastError()``.
    /// - Note: FMDB compatibility: an addition; FMDB's `executeUpdate` forms are unchanged.
    public func execute<each V: SQLiteBindable>(_ sql: String, _ values: repeat each V) throws {
        try recording {
            try update(sql) { statement in
                try PreparedStatement(statement: statement, database: self).bindValues(repeat each values)
            }
        }
    }

    /// Runs a query, its `?` parameters bound to `values` in order, and returns its rows; throws on error.
    /// Any number of arguments, none included, each bound by its own type (``SQLiteBindable``).
    ///
    /// ```swift
    /// let rs = try db.query("SELECT name FROM people WHERE id > ? AND email IS NOT ?", 0, nil as String?)
    /// while rs.next() { print(rs.string(forColumnIndex: 0) ?? "") }
    /// let all = try db.query("SELECT count(*) FROM people")
    /// ```
    ///
    /// The result set is the one ``executeQuery(_:values:)`` returns: it closes itself at the end of its
    /// rows, when its database closes, or when it is released. Values bind as in
    /// ``execute(_:_:)``.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/prepare.html>
    ///
    /// - Parameters:
    ///   - sql: One SQL statement.
    ///   - values: The values of its `?` parameters, as many as it has.
    /// - Returns: The result set, before its first row: call ``FMResultSet/next()``.
    /// - Throws: ``FMDatabaseError`` with SQLite's code: code 1 (`SQLITE_ERROR`) for SQL that does not
    ///   compile, code 25 (`SQLITE_RANGE`) when the number of values is not the number of parameters, code
    ///   21 (`SQLITE_MISUSE`) on a closed database. Errors met stepping rows come from
    ///   ``FMResultSet/nextWithError()``. The error is also kept for ``lastError()``.
    /// - Note: FMDB compatibility: an addition; FMDB's `executeQuery` forms are unchanged.
    public func query<each V: SQLiteBindable>(_ sql: String, _ values: repeat each V) throws -> FMResultSet {
        try recording {
            try query(sql) { statement in
                try PreparedStatement(statement: statement, database: self).bindValues(repeat each values)
            }
        }
    }
}
