import Foundation

/// Ordered, named schema migrations, registered in code and applied once each, through a keyed
/// ``FMDatabaseQueue`` or ``FMDatabasePool`` (any ``FMDatabaseWriter``).
///
/// Each migration runs in its own immediate transaction, followed by `PRAGMA foreign_key_check`, and is
/// recorded in the table `fmdb_migrations` of the database in the same transaction: a migration either
/// happened completely and is recorded, or did not happen at all (a crash or `SIGKILL` in the middle
/// leaves the database as it was before it). Migrations run in the order they were registered; a
/// database that records a migration this code does not know (it was migrated by a newer version of
/// the program) is refused before anything runs.
///
/// ```swift
/// var migrator = FMDatabaseMigrator()
/// migrator.registerMigration("createNotes") { db in
///     try db.executeUpdate("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", values: nil)
/// }
/// migrator.registerMigration("addNoteDates") { db in
///     try db.executeUpdate("ALTER TABLE notes ADD COLUMN created REAL", values: nil)
/// }
/// let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
/// try migrator.migrate(queue)
/// ```
///
/// Related SQLite documentation: <https://www.sqlite.org/pragma.html#pragma_foreign_key_check>
///
/// Sendable: a value whose migrations are `@Sendable` closures.
///
/// - Note: FMDB compatibility: a Swift-native addition (FMDB has no migrator; the shape follows GRDB's
///   `DatabaseMigrator`).
public struct FMDatabaseMigrator: Sendable {
    private struct Migration: Sendable {
        let identifier: String
        let migrate: @Sendable (FMDatabase) throws -> Void
    }

    /// The table that records applied migrations.
    public static let tableName = "fmdb_migrations"

    private var registered: [Migration] = []

    /// A migrator with no migrations.
    ///
    /// ```swift
    /// var migrator = FMDatabaseMigrator()
    /// ```
    public init() {}

    /// The identifiers of the registered migrations, in order.
    public var migrations: [String] { registered.map(\.identifier) }

    /// Adds a migration after the ones registered so far.
    ///
    /// ```swift
    /// migrator.registerMigration("createNotes") { db in
    ///     try db.executeUpdate("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)", values: nil)
    /// }
    /// ```
    /// - Parameters:
    ///   - identifier: The migration's name, recorded in the database once it ran; unique. Never rename
    ///     a migration that shipped: a database that recorded the old name would be refused.
    ///   - migrate: Changes the schema or data. It runs inside the migration's transaction: throwing
    ///     rolls the migration back. It must not begin or commit transactions itself.
    /// - Precondition: `identifier` was not registered before (a programming error).
    public mutating func registerMigration(
        _ identifier: String, migrate: @escaping @Sendable (FMDatabase) throws -> Void
    ) {
        precondition(
            !registered.contains { $0.identifier == identifier },
            "FMDatabaseMigrator: the migration \"\(identifier)\" is registered twice.")
        registered.append(Migration(identifier: identifier, migrate: migrate))
    }

    /// Applies, in order, every registered migration the database has not recorded yet, each in an immediate
    /// transaction of the queue or pool (a pool's waits its turn behind the file's other pool transactions).
    ///
    /// ```swift
    /// try migrator.migrate(queue)
    /// try migrator.migrate(pool)
    /// ```
    /// - Parameter writer: The queue or pool of the database.
    /// - Throws: `SQLITE_ERROR` when the database records a migration this migrator does not know
    ///   (nothing runs then); `SQLITE_CONSTRAINT` when a migration leaves a foreign key violation (that
    ///   migration is rolled back); what a migration throws (it is rolled back); an error whose
    ///   ``FMDatabaseError/transactionWasRolledBack`` is true when SQLite rolled the migration's transaction
    ///   back after one of its statements failed, even one the migration caught (it is neither applied nor
    ///   recorded); or the database's error.
    ///   Migrations applied before the failing one stay applied.
    public func migrate(_ writer: any FMDatabaseWriter) throws {
        try writer.inTransaction(.immediate) { db in
            try db.executeUpdate(
                "CREATE TABLE IF NOT EXISTS \(Self.tableName) "
                    + "(identifier TEXT PRIMARY KEY NOT NULL, applied REAL NOT NULL)",
                values: nil)
            try refuseUnknown(Self.applied(db))
        }
        for migration in registered {
            try writer.inTransaction(.immediate) { db in
                // Checked again inside the write lock: another process may have applied it meanwhile.
                let applied = try Self.applied(db)
                try refuseUnknown(applied)
                guard !applied.contains(migration.identifier) else { return }
                try migration.migrate(db)
                try Self.checkForeignKeys(db, after: migration.identifier)
                try db.executeUpdate(
                    "INSERT INTO \(Self.tableName) (identifier, applied) VALUES (?, ?)",
                    values: [migration.identifier, Date().timeIntervalSince1970])
            }
        }
    }

    /// The identifiers of the migrations the database records as applied, in the order they were applied.
    ///
    /// ```swift
    /// let applied = try migrator.appliedMigrations(queue)
    /// ```
    /// - Parameter writer: The queue or pool of the database.
    public func appliedMigrations(_ writer: any FMDatabaseWriter) throws -> [String] {
        try writer.inDatabase { db in try Self.applied(db) }
    }

    // MARK: - Checks

    private func refuseUnknown(_ applied: [String]) throws {
        let known = Set(migrations)
        let unknown = applied.filter { !known.contains($0) }
        guard unknown.isEmpty else {
            throw FMDatabaseError(
                code: SQLITE_ERROR,
                message:
                    "The database records migrations this program does not know (\(unknown.joined(separator: ", "))): "
                    + "it was migrated by another (newer) version of the program. Nothing was changed."
            )
        }
    }

    private static func applied(_ db: FMDatabase) throws -> [String] {
        let exists = try db.executeQuery(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", values: [tableName])
        let hasTable = try exists.nextWithError()
        exists.close()
        guard hasTable else { return [] }
        let rs = try db.executeQuery("SELECT identifier FROM \(tableName) ORDER BY rowid", values: nil)
        var identifiers: [String] = []
        while try rs.nextWithError() {
            if let identifier = rs.string(forColumnIndex: 0) { identifiers.append(identifier) }
        }
        return identifiers
    }

    private static func checkForeignKeys(_ db: FMDatabase, after identifier: String) throws {
        let rs = try db.executeQuery("PRAGMA foreign_key_check", values: nil)
        defer { rs.close() }
        if try rs.nextWithError() {
            let table = rs.string(forColumnIndex: 0) ?? "?"
            let parent = rs.string(forColumnIndex: 2) ?? "?"
            throw FMDatabaseError(
                code: SQLITE_CONSTRAINT,
                message:
                    "The migration \"\(identifier)\" left a foreign key violation (a row of \(table) refers to a "
                    + "missing row of \(parent)): it was rolled back."
            )
        }
    }
}
