import FMDB
import Foundation
import Logging

/// The notes table in an encrypted database, through a keyed `FMDatabasePool`.
///
/// Writes run in immediate transactions (they take the write lock at BEGIN, so a rekey never meets one half
/// done, and one whose BEGIN met a changed key begins again on a new connection by itself); reads run with
/// `perform`. Each call goes through `withRetries`, which acts on the error's `FMErrorDisposition`.
public final class NotesStore: Sendable {
    /// How the store opens its database.
    public struct Settings: Sendable {
        /// The database file.
        public var path: String
        /// Where the key comes from, at start and at each reload.
        public var keySource: DatabaseKeySource
        /// The most connections the pool opens: requests beyond it wait for one (default 8).
        public var poolSize: Int
        /// How long a statement waits for a lock another connection or process holds (a rekey holds the
        /// write lock for its whole transaction) before it fails with `SQLITE_BUSY` (default 5 s).
        public var busyTimeout: TimeInterval
        /// The environment a credential's directory is looked up in.
        public var environment: [String: String]

        public init(
            path: String, keySource: DatabaseKeySource, poolSize: Int = 8, busyTimeout: TimeInterval = 5,
            environment: [String: String] = ProcessInfo.processInfo.environment
        ) {
            self.path = path
            self.keySource = keySource
            self.poolSize = poolSize
            self.busyTimeout = busyTimeout
            self.environment = environment
        }
    }

    /// The pool; public for operators' in-process actions (`rekey(using:)`) and for tests.
    public let pool: FMDatabasePool
    public let settings: Settings
    private let logger: Logger

    /// Opens (or creates) the database with the key the source holds, switches it to WAL and applies the
    /// migrations. Throws a clear error for a wrong key (code 26), an unreadable key or a failed migration.
    public init(settings: Settings, logger: Logger) throws {
        var configuration = FMDatabaseConfiguration(
            keyProvider: try settings.keySource.makeKeyProvider(environment: settings.environment))
        configuration.logger = logger
        configuration.logsErrors = false  // Errors are thrown and answered below.
        configuration.busyTimeout = settings.busyTimeout
        configuration.maximumNumberOfDatabasesToCreate = settings.poolSize
        // A pool transaction waits this long for its turn behind the others before it fails as transient.
        configuration.transactionQueueTimeout = settings.busyTimeout
        pool = try FMDatabasePool(path: settings.path, configuration: configuration)
        self.settings = settings
        self.logger = logger
        // WAL: readers do not wait for the writer, and the writer does not wait for readers. The mode is
        // kept in the file, so this is done once, not per connection.
        try pool.inDatabase { db in
            let mode = try db.fetchOne(String.self, "PRAGMA journal_mode = WAL")
            if mode != "wal" {
                logger.warning("the database did not switch to WAL", metadata: ["mode": "\(mode ?? "")"])
            }
        }
        try Self.migrator.migrate(pool)
    }

    /// The schema, in order; a migration that shipped is never renamed or changed.
    static var migrator: FMDatabaseMigrator {
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("createNotes") { db in
            try db.executeUpdate(
                """
                CREATE TABLE notes (
                    id INTEGER PRIMARY KEY,
                    title TEXT NOT NULL,
                    body TEXT NOT NULL,
                    created REAL NOT NULL
                )
                """, values: nil)
        }
        return migrator
    }

    // MARK: - Notes

    public func create(_ new: NewNote) async throws -> Note {
        try await withRetries {
            try await self.pool.performTransaction(.immediate) { db in
                let created = Date()
                try db.execute(
                    "INSERT INTO notes (title, body, created) VALUES (?, ?, ?)", new.title, new.body, created)
                return Note(id: db.lastInsertRowId, title: new.title, body: new.body, created: created)
            }
        }
    }

    public func note(id: Int64) async throws -> Note? {
        try await withRetries {
            try await self.pool.perform { db in
                try db.fetchOne(Note.self, "SELECT * FROM notes WHERE id = ?", values: [id])
            }
        }
    }

    /// The notes with an id above `after`, oldest first, at most `limit`.
    public func notes(after: Int64, limit: Int) async throws -> [Note] {
        try await withRetries {
            try await self.pool.perform { db in
                try db.fetchAll(
                    Note.self, "SELECT * FROM notes WHERE id > ? ORDER BY id LIMIT ?", values: [after, limit])
            }
        }
    }

    /// Whether a note was there to delete.
    public func delete(id: Int64) async throws -> Bool {
        try await withRetries {
            try await self.pool.performTransaction(.immediate) { db in
                try db.execute("DELETE FROM notes WHERE id = ?", id)
                return db.changes > 0
            }
        }
    }

    // MARK: - Operations

    /// Proves the key still opens the file: a read of the schema on a pooled connection, which the pool checks
    /// against the file first. It takes no write lock.
    public func checkHealth() async throws -> Health {
        try await withRetries {
            _ = try await self.pool.perform { db in try db.fetchOne(Int.self, "SELECT count(*) FROM sqlite_master") }
        }
        return Health(
            status: "ok", openConnections: pool.countOfOpenDatabases, connectionsInUse: pool.countOfCheckedOutDatabases)
    }

    /// Reads the key source again and hands the pool the new provider (SIGHUP, `systemctl reload`). A key that
    /// does not open the database is refused, and the pool keeps the key it has.
    public func reloadKey() async throws {
        do {
            let provider = try settings.keySource.makeKeyProvider(environment: settings.environment)
            try await pool.replaceKeyProvider(provider)
            logger.info("database key reloaded")
        } catch {
            logger.error("database key not reloaded; the old one stays in use", metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Closes the idle connections; a connection still in use closes when its block returns. Called once the
    /// HTTP server has stopped, so no request holds one then.
    public func close() {
        pool.releaseAllDatabases()
        logger.debug("database connections closed")
    }

    // MARK: - Errors

    /// Runs `operation` again once when its block met a key changed elsewhere (the library replaced the
    /// connection); any other error is the caller's: `StoreError.httpStatus` answers it.
    func withRetries<T: Sendable>(_ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch  where FMErrorDisposition(error) == .connectionReplaced {
            logger.debug("a request met a key change; running it again on a new connection")
            return try await operation()
        }
    }
}
