import Foundation

/// Integrity checks and row counts: what a verified copy compares, and what `fmdb-cipher check` reports.
extension FMDatabase {
    /// The problems `PRAGMA integrity_check` (or, with `quick`, `PRAGMA quick_check`) reports: one string per
    /// problem, none when the database is intact.
    ///
    /// ```swift
    /// let problems = try db.integrityProblems()
    /// if !problems.isEmpty { print("damaged:", problems.prefix(3)) }
    /// ```
    ///
    /// Rows are read with `nextWithError()`: a page that cannot be read fails the check with its error
    /// (`SQLITE_CORRUPT`, `SQLITE_NOTADB`), never reads as "no problems".
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/pragma.html#pragma_integrity_check>
    /// - Parameter quick: `quick_check`: no index contents are compared, in O(N) time.
    /// - Returns: the problems, one per line SQLite reports; empty when it says "ok".
    /// - Throws: `FMDatabaseError` when the check itself fails.
    /// - Note: FMDB compatibility: FMDB has no such method; this is an addition.
    public func integrityProblems(quick: Bool = false) throws -> [String] {
        try pragmaProblems(quick ? "PRAGMA quick_check" : "PRAGMA integrity_check")
    }

    /// The pages whose HMAC fails, as SQLCipher 4's `PRAGMA cipher_integrity_check` reports them on a keyed
    /// connection ("HMAC verification failed for page N"); none when every page passes, and always none on
    /// SQLCipher 3.4.1, which has no such pragma (`CipherFormat.v4.isSupportedByLinkedSQLCipher` tells).
    /// None, too, when SQLCipher declines to check the file's format (no per-page HMAC):
    /// ``cipherIntegrityProblemsIfChecked()`` tells that apart.
    ///
    /// ```swift
    /// let failed = try db.cipherIntegrityProblems()
    /// ```
    ///
    /// Related SQLite documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#cipher_integrity_check>
    /// - Throws: `FMDatabaseError` when the check itself fails.
    /// - Note: FMDB compatibility: FMDB has no such method; this is an addition.
    public func cipherIntegrityProblems() throws -> [String] {
        try cipherIntegrityProblemsIfChecked() ?? []
    }

    /// `cipherIntegrityProblems()`, or nil when SQLCipher declined to check: a format without a per-page
    /// HMAC (SQLCipher 1's, or `cipher_use_hmac = OFF`) has nothing for it to check, and it answers so
    /// ("HMAC is not enabled, unable to integrity check") instead of naming a damaged page. That answer is
    /// not damage; `integrityProblems()` still checks the database's structure.
    ///
    /// ```swift
    /// if let failed = try db.cipherIntegrityProblemsIfChecked() { print(failed) } else { print("not checked") }
    /// ```
    ///
    /// Related SQLite documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#cipher_integrity_check>
    /// - Throws: `FMDatabaseError` when the check itself fails.
    /// - Note: FMDB compatibility: FMDB has no such method; this is an addition.
    public func cipherIntegrityProblemsIfChecked() throws -> [String]? {
        let problems = try pragmaProblems("PRAGMA cipher_integrity_check")
        return problems.count == 1 && Self.isCipherCheckDeclined(problems[0]) ? nil : problems
    }

    /// Whether a `cipher_integrity_check` row is SQLCipher declining to check the format (it has no HMAC).
    static func isCipherCheckDeclined(_ row: String) -> Bool {
        row.trimmingCharacters(in: .whitespaces).lowercased().hasPrefix("hmac is not enabled")
    }

    /// Every user table (`sqlite_master`, names not starting with `sqlite_`) with its row count, by name.
    /// Any table name works (it is quoted); a damaged page fails the count with its error, never reads as 0.
    ///
    /// ```swift
    /// for (table, rows) in try db.tableRowCounts() { print(table, rows) }
    /// ```
    ///
    /// - Returns: (name, rows) pairs, ordered by name.
    /// - Throws: `FMDatabaseError` when a table cannot be read.
    /// - Note: FMDB compatibility: FMDB has no such method; this is an addition.
    public func tableRowCounts() throws -> [(name: String, rows: Int64)] {
        var names: [String] = []
        let rs = try executeQuery(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
            values: nil)
        while try rs.nextWithError() { if let name = rs.string(forColumnIndex: 0) { names.append(name) } }
        return try names.map { name in
            let quoted = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let count = try executeQuery("SELECT count(*) FROM \(quoted)", values: nil)
            return (name, try count.nextWithError() ? count.longLongInt(forColumnIndex: 0) : 0)
        }
    }

    /// The rows of a check pragma that are not "ok", a line each (SQLite may put several problems in one row).
    private func pragmaProblems(_ sql: String) throws -> [String] {
        var problems: [String] = []
        let rs = try executeQuery(sql, values: nil)
        while try rs.nextWithError() {
            let row = rs.string(forColumnIndex: 0) ?? ""
            if row != "ok" { problems += row.split(separator: "\n").map(String.init) }
        }
        return problems
    }
}
