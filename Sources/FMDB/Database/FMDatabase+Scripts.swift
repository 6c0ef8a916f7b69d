import Foundation

/// Running a script of several statements, each with its own result set.
extension FMDatabase {
    /// Runs every statement of `script` in order, handing each one's result set to `body` before the
    /// next statement is compiled (so later statements may use what earlier ones created). `body` steps
    /// the result set as it likes; statements that return no rows are stepped to completion after it.
    ///
    /// ```swift
    /// try db.executeScript("CREATE TABLE t (a); INSERT INTO t VALUES (1); SELECT a FROM t") { rs in
    ///     while rs.next() { print(rs.int(forColumnIndex: 0)) }
    /// }
    /// ```
    public func executeScript(_ script: String, _ body: (FMResultSet) throws -> Void) throws {
        try recording {
            let connection = try requireConnection(sql: script)
            let bytes = Array(script.utf8)
            var offset = 0
            while offset < bytes.count {
                guard let (statement, consumed) = try connection.prepare(bytes, from: offset) else { break }
                offset += consumed
                if traceExecution {
                    logger.info(
                        "\(loggablePath) executeScript: \(FMDatabaseError.loggable(statement.sql))")
                }
                statement.inUse = true
                let rs = FMResultSet(statement: statement, parent: self)
                try body(rs)
                if rs.currentStatement != nil {
                    while try rs.nextWithError() {}
                }
                rs.close()
            }
        }
    }
}
