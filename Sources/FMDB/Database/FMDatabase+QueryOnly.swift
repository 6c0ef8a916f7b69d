import Foundation

extension FMDatabase {
    /// Holds SQL run on this connection to reading, for as long as it is open: for SQL that comes from
    /// outside (an operator's query, a report) on a database that must not change.
    ///
    /// `PRAGMA query_only = ON` refuses statements that write, but lets through a PRAGMA that rewrites the
    /// file (`PRAGMA journal_mode = WAL` changes its header) or undoes it (`PRAGMA query_only = OFF`). After
    /// this call the connection's authorizer also refuses, with `SQLITE_AUTH`, every PRAGMA that sets a value
    /// (except those whose argument names what to read: `table_info(t)`, `index_list(t)`, `integrity_check(n)`)
    /// or acts without one (`wal_checkpoint`, `optimize`, `incremental_vacuum`), `ATTACH`, `DETACH` and so
    /// `VACUUM`, and every statement that changes a schema, temporary ones included. A row write (`INSERT`,
    /// `UPDATE`, `DELETE`) is refused by the library's own check when it prepares the statement (`SQLITE_AUTH`),
    /// or stopped when it runs by `PRAGMA query_only`: `SQLITE_READONLY` to a statement prepared through the C
    /// API on ``sqliteHandle``, the same `SQLITE_AUTH` refusal through this library. Reading PRAGMAs
    /// (`PRAGMA user_version`, `PRAGMA table_info(t)`) and transactions stay allowed.
    ///
    /// Unlike opening with `SQLITE_OPEN_READONLY`, the connection can still remove the `-wal` and `-shm`
    /// files of a WAL database when it closes last, so reading leaves no side files behind. Call it after
    /// keying. Statements prepared before are compiled again under these rules before they next run.
    ///
    /// - Throws: ``FMDatabaseError`` when the connection is closed or `PRAGMA query_only` did not take.
    public func makeQueryOnly() throws {
        try recording { try requireConnection().makeQueryOnly() }
    }

    /// Whether ``makeQueryOnly()`` holds this connection to reading.
    public var isQueryOnly: Bool { connection?.authorizerState.isQueryOnly ?? false }
}
