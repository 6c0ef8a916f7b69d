import FMDB
import FMDBService
import Foundation
import Logging
import Metrics

/// The notes table in an encrypted database, through FMDBService's `FMDatabaseService`: a keyed pool that is a
/// service of the application's service group. It opens the pool when the group starts it (and migrates it
/// before serving), reloads the key on SIGHUP (`systemctl reload`), and at graceful shutdown lets running
/// calls end and closes the pool.
///
/// Writes run in immediate transactions (they take the write lock at BEGIN, so a rekey never meets one half
/// done, and one whose BEGIN met a changed key begins again on a new connection by itself); reads run with
/// `perform`. Each call goes through `withRetries`, which acts on the error's `FMErrorDisposition`.
public final class NotesStore: Sendable {
    /// How the store opens its database.
    public struct Settings: Sendable {
        /// The database file; made at the first start.
        public var path: String
        /// Where the key comes from, at start and at each reload.
        public var keySource: DatabaseKeySource
        /// What the key opens: the database, or a key slot of it.
        public var keyKind: DatabaseKeyKind
        /// The most connections the pool opens: requests beyond it wait for one (default 8).
        public var poolSize: Int
        /// How long a statement waits for a lock another connection or process holds (a rekey holds the
        /// write lock for its whole transaction) before it fails with `SQLITE_BUSY` (default 5 s).
        public var busyTimeout: TimeInterval
        /// How long graceful shutdown waits for running requests' database calls (default 10 s).
        public var drainTimeout: Duration
        /// The environment a credential's directory is looked up in.
        public var environment: [String: String]

        public init(
            path: String, keySource: DatabaseKeySource, keyKind: DatabaseKeyKind = .rawKey, poolSize: Int = 8,
            busyTimeout: TimeInterval = 5, drainTimeout: Duration = .seconds(10),
            environment: [String: String] = ProcessInfo.processInfo.environment
        ) {
            self.path = path
            self.keySource = keySource
            self.keyKind = keyKind
            self.poolSize = poolSize
            self.busyTimeout = busyTimeout
            self.drainTimeout = drainTimeout
            self.environment = environment
        }
    }

    /// The database service: a member of the service group, and the way to the pool for operators' in-process
    /// actions (`withPool { try await $0.rekey(using:) }`) and tests.
    public let database: FMDatabaseService
    private let logger: Logger

    /// A store whose database opens when `database` runs; nothing is read or opened here.
    public init(settings: Settings, logger: Logger, metricsFactory: (any MetricsFactory)? = nil) {
        var configuration = FMDatabaseConfiguration()
        configuration.logger = logger
        configuration.logsErrors = false  // Errors are thrown and answered (StoreErrorResponse.swift).
        configuration.busyTimeout = settings.busyTimeout
        configuration.maximumNumberOfDatabasesToCreate = settings.poolSize
        // A pool transaction waits this long for its turn behind the others before it fails as transient.
        configuration.transactionQueueTimeout = settings.busyTimeout
        var options = FMDatabaseServiceOptions(
            drainTimeout: settings.drainTimeout, createsMissingDatabase: true, logger: logger,
            metricsFactory: metricsFactory)
        // A key file is read again when the pool meets the database under another key (a plain rekey with
        // the new key written there first); a credential holds the key systemd wrote at start.
        options.readsKeySourceOnKeyChange = settings.keySource.changesWhileRunning
        // The journal shows the service's start, reloads and shutdown, and a reload that kept the old key.
        options.logLevel = .info
        options.reloadFailureLogLevel = .warning
        // Once the pool is open and before any call is served; a failure fails the start.
        options.afterOpening = { pool in
            // WAL: readers do not wait for the writer, and the writer does not wait for readers. The mode is
            // kept in the file, so this is done once, not per connection.
            let mode = try pool.inDatabase { db in try db.fetchOne(String.self, "PRAGMA journal_mode = WAL") }
            if mode != "wal" { logger.warning("the database did not switch to WAL: \(mode ?? "no answer")") }
            try Self.migrator.migrate(pool)
        }
        let keySource = settings.keySource
        let keyKind = settings.keyKind
        let environment = settings.environment
        database = FMDatabaseService(path: settings.path, configuration: configuration, options: options) {
            try keySource.makeKeyProvider(kind: keyKind, environment: environment)
        }
        self.logger = logger
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
            try await self.database.performTransaction(.immediate) { db in
                let created = Date()
                try db.execute(
                    "INSERT INTO notes (title, body, created) VALUES (?, ?, ?)", new.title, new.body, created)
                return Note(id: db.lastInsertRowId, title: new.title, body: new.body, created: created)
            }
        }
    }

    public func note(id: Int64) async throws -> Note? {
        try await withRetries {
            try await self.database.perform { db in
                try db.fetchOne(Note.self, "SELECT * FROM notes WHERE id = ?", values: [id])
            }
        }
    }

    /// The notes with an id above `after`, oldest first, at most `limit`.
    public func notes(after: Int64, limit: Int) async throws -> [Note] {
        try await withRetries {
            try await self.database.perform { db in
                try db.fetchAll(
                    Note.self, "SELECT * FROM notes WHERE id > ? ORDER BY id LIMIT ?", values: [after, limit])
            }
        }
    }

    /// Whether a note was there to delete.
    public func delete(id: Int64) async throws -> Bool {
        try await withRetries {
            try await self.database.performTransaction(.immediate) { db in
                try db.execute("DELETE FROM notes WHERE id = ?", id)
                return db.changes > 0
            }
        }
    }

    // MARK: - Operations

    /// Proves the key in use still opens the file (a read on a pooled connection after its key check, without
    /// the write lock), with the pool's numbers.
    public func checkHealth() async throws -> Health {
        _ = try await withRetries { try await self.database.checkHealth() }
        let statistics = database.statistics
        return Health(
            status: "ok", openConnections: statistics.pool.openConnections,
            connectionsInUse: statistics.pool.checkedOutConnections, keyReloads: statistics.reloadsSucceeded)
    }

    // MARK: - Errors

    /// Runs `operation` again once when its block met a key changed elsewhere (the library replaced the
    /// connection); any other error is the caller's: `httpError(for:logger:)` answers it.
    func withRetries<T: Sendable>(_ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch  where FMErrorDisposition(error) == .connectionReplaced {
            logger.debug("a request met a key change; running it again on a new connection")
            return try await operation()
        }
    }
}
