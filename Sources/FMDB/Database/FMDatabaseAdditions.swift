import Foundation

/// FMDB's `FMDatabaseAdditions`: one-value queries, schema questions, pragmas.
extension FMDatabase {
    /// Runs `sql` and reads column 0 of the first row with `read`; `fallback` when there is no row.
    private func firstValue<T>(_ sql: String, _ arguments: [Any?], fallback: T, read: (FMResultSet) -> T) -> T {
        let value = recordingOptional { () throws -> T in
            let rs = try query(sql) { try $0.bind(array: arguments, dateFormatter: dateFormatter) }
            defer { rs.close() }
            guard try rs.nextWithError() else { return fallback }
            return read(rs)
        }
        return value ?? fallback
    }

    /// Column 0 of the first row as Int32 (0 when there is no row).
    ///
    /// ```swift
    /// let count = db.int(forQuery: "SELECT count(*) FROM t WHERE a > ?", 10)
    /// ```
    @discardableResult
    public func int(forQuery sql: String, _ arguments: Any?...) -> Int32 {
        firstValue(sql, arguments, fallback: 0) { $0.int(forColumnIndex: 0) }
    }

    /// Column 0 of the first row as Int (0 when there is no row).
    @discardableResult
    public func long(forQuery sql: String, _ arguments: Any?...) -> Int {
        firstValue(sql, arguments, fallback: 0) { $0.long(forColumnIndex: 0) }
    }

    /// Column 0 of the first row as Bool (false when there is no row).
    @discardableResult
    public func bool(forQuery sql: String, _ arguments: Any?...) -> Bool {
        firstValue(sql, arguments, fallback: false) { $0.bool(forColumnIndex: 0) }
    }

    /// Column 0 of the first row as Double (0 when there is no row).
    @discardableResult
    public func double(forQuery sql: String, _ arguments: Any?...) -> Double {
        firstValue(sql, arguments, fallback: 0) { $0.double(forColumnIndex: 0) }
    }

    /// Column 0 of the first row as text (nil for NULL or no row).
    @discardableResult
    public func string(forQuery sql: String, _ arguments: Any?...) -> String? {
        firstValue(sql, arguments, fallback: nil) { $0.string(forColumnIndex: 0) }
    }

    /// Column 0 of the first row as bytes (nil for NULL, an empty BLOB, or no row).
    @discardableResult
    public func data(forQuery sql: String, _ arguments: Any?...) -> Data? {
        firstValue(sql, arguments, fallback: nil) { $0.data(forColumnIndex: 0) }
    }

    /// Column 0 of the first row as a date (nil for NULL or no row).
    @discardableResult
    public func date(forQuery sql: String, _ arguments: Any?...) -> Date? {
        firstValue(sql, arguments, fallback: nil) { $0.date(forColumnIndex: 0) }
    }

    /// Whether a table of that name exists (case-insensitive).
    @discardableResult
    public func tableExists(_ tableName: String) -> Bool {
        let rs = executeQuery(
            "select [sql] from sqlite_master where [type] = 'table' and lower(name) = ?",
            tableName.lowercased()
        )
        defer { rs?.close() }
        return rs?.next() ?? false
    }

    /// Every table, index, view and trigger: columns type, name, tbl_name, rootpage, sql.
    @discardableResult
    public func getSchema() -> FMResultSet? {
        executeQuery(
            "SELECT type, name, tbl_name, rootpage, sql FROM (SELECT * FROM sqlite_master UNION ALL "
                + "SELECT * FROM sqlite_temp_master) WHERE type != 'meta' AND name NOT LIKE 'sqlite_%' "
                + "ORDER BY tbl_name, type DESC, name"
        )
    }

    /// `PRAGMA table_info` of a table: columns cid, name, type, notnull, dflt_value, pk.
    @discardableResult
    public func getTableSchema(_ tableName: String) -> FMResultSet? {
        executeQuery("pragma table_info('\(tableName.replacingOccurrences(of: "'", with: "''"))')")
    }

    /// Whether a table has a column of that name (case-insensitive).
    @discardableResult
    public func columnExists(_ columnName: String, inTableWithName tableName: String) -> Bool {
        guard let rs = getTableSchema(tableName) else { return false }
        defer { rs.close() }
        let wanted = columnName.lowercased()
        while rs.next() {
            if rs.string(forColumn: "name")?.lowercased() == wanted { return true }
        }
        return false
    }

    /// Compiles `sql` without running it; throws SQLite's error when it does not compile.
    public func validateSQL(_ sql: String) throws {
        try recording {
            let statement = try requireConnection(sql: sql).prepare(sql)
            statement.finalize()
        }
    }

    private func pragmaUInt32(_ name: String) -> UInt32 {
        UInt32(
            truncatingIfNeeded: firstValue("PRAGMA \(name)", [], fallback: Int64(0)) {
                $0.longLongInt(forColumnIndex: 0)
            })
    }

    private func setPragma(_ name: String, _ value: UInt32) {
        // Pragma values cannot be bound; the value is an integer we format ourselves.
        executeUpdate("PRAGMA \(name) = \(Int32(bitPattern: value))")
    }

    /// `PRAGMA application_id`.
    public var applicationID: UInt32 {
        get { pragmaUInt32("application_id") }
        set { setPragma("application_id", newValue) }
    }

    /// The application ID as four characters (FMDB's `NSFileTypeForHFSTypeCode` reading).
    public var applicationIDString: String {
        get {
            let id = applicationID
            let bytes = [UInt8(id >> 24 & 0xFF), UInt8(id >> 16 & 0xFF), UInt8(id >> 8 & 0xFF), UInt8(id & 0xFF)]
            return String(decoding: bytes, as: UTF8.self)
        }
        set {
            let bytes = Array(newValue.utf8)
            guard bytes.count == 4 else {
                recordingBool {
                    throw FMDatabaseError.misuse(
                        "applicationIDString must be four ASCII characters, got '\(newValue)'.")
                }
                return
            }
            applicationID = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
    }

    /// `PRAGMA user_version`.
    public var userVersion: UInt32 {
        get { pragmaUInt32("user_version") }
        set { setPragma("user_version", newValue) }
    }
}
