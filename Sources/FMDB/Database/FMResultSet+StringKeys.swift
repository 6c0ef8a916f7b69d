import Foundation

extension FMResultSet {
    /// The current row as `[String: Any]`: column name to ``object(forColumnIndex:)``, NULL as `NSNull`.
    ///
    /// ``resultDictionary`` keeps FMDB's type, `[AnyHashable: Any]?` (its keys are always `String`);
    /// this spelling says so in the type, so no key needs a cast. nil when there is no current row (before
    /// the first `next()`, after a bind) and on a closed set, as ``resultDictionary``.
    ///
    /// ```swift
    /// let rs = try db.executeQuery("SELECT id, name FROM people", values: nil)
    /// while rs.next() {
    ///     if let row = rs.resultDictionaryWithStringKeys { print(row["name"] ?? NSNull()) }
    /// }
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/column_name.html>
    public var resultDictionaryWithStringKeys: [String: Any]? {
        guard currentRowHandle != nil, let statement = currentStatement else { return nil }
        let count = statement.columnCount
        var row: [String: Any] = [:]
        row.reserveCapacity(Int(count))
        for index in 0..<count {
            guard let name = statement.columnName(index) else { continue }
            row[name] = object(forColumnIndex: index) ?? NSNull()
        }
        return row
    }
}
