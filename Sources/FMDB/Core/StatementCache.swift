/// Prepared statements kept by SQL text for reuse (`FMDatabase.shouldCacheStatements`).
///
/// A statement handed out to an open result set is marked `inUse` and is never handed out again
/// until that result set closes; a second query with the same SQL meanwhile prepares (and caches)
/// another statement.
struct StatementCache {
    private var statements: [String: [Statement]] = [:]
    /// The last SQL looked up and its statements: a loop running one statement finds it by one string
    /// comparison (usually of identical strings, which compares no bytes) instead of hashing the SQL.
    private var recent: (sql: String, statements: [Statement])?

    var isEmpty: Bool { statements.isEmpty }

    /// A cached statement for `sql` that nobody is using. It was reset when it was given back; every
    /// parameter is bound again before it runs (bind counts are checked), so bindings need no clearing.
    mutating func take(_ sql: String) -> Statement? {
        let candidates: [Statement]
        if let recent, recent.sql == sql {
            candidates = recent.statements
        } else {
            guard let found = statements[sql] else { return nil }
            candidates = found
            recent = (sql, found)
        }
        for statement in candidates where !statement.inUse && !statement.isFinalized {
            return statement
        }
        return nil
    }

    mutating func insert(_ statement: Statement) {
        statement.isCached = true
        recent = nil
        statements[statement.sql, default: []].append(statement)
    }

    /// Finalizes every cached statement; one in use by an open result set is finalized when that
    /// set closes.
    mutating func removeAll() {
        for candidates in statements.values {
            for statement in candidates {
                statement.isCached = false
                if !statement.inUse { statement.finalize() }
            }
        }
        statements.removeAll()
        recent = nil
    }
}
