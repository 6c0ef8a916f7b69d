/// Prepared statements kept by SQL text for reuse (`FMDatabase.shouldCacheStatements`).
///
/// A statement handed out to an open result set is marked `inUse` and is never handed out again
/// until that result set closes; a second query with the same SQL meanwhile prepares (and caches)
/// another statement.
struct StatementCache {
    private var statements: [String: [Statement]] = [:]
    /// The last SQL looked up and its statements: a loop running one statement finds it by one string
    /// comparison (usually of identical strings, which compares no bytes) instead of hashing the SQL.
    /// Two stored properties rather than an optional tuple, so the comparison and the scan read them
    /// in place instead of copying (and retaining) the pair at every lookup.
    private var recentSQL: String?
    private var recentStatements: [Statement] = []

    var isEmpty: Bool { statements.isEmpty }

    /// A cached statement for `sql` that nobody is using. It was reset when it was given back; every
    /// parameter is bound again before it runs (bind counts are checked), so bindings need no clearing.
    mutating func take(_ sql: String) -> Statement? {
        if recentSQL != sql {
            guard let found = statements[sql] else { return nil }
            recentSQL = sql
            recentStatements = found
        }
        for position in recentStatements.indices {
            let statement = recentStatements[position]
            if !statement.inUse && !statement.isFinalized { return statement }
        }
        return nil
    }

    mutating func insert(_ statement: Statement) {
        statement.isCached = true
        recentSQL = nil
        recentStatements = []
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
        recentSQL = nil
        recentStatements = []
    }
}
