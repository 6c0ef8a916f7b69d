@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// What the migrator makes of the records of applied migrations: read again inside each migration's own
/// transaction (after the write lock is taken), checked before any migration, and none on a new database.
final class FMDatabaseMigratorRecordsTests: FMDBCipherTestCase {
    /// A migration recorded by a newer version of the program between two of this one's transactions stops
    /// the rest: the first migration's block records it here, in place of another process doing so between
    /// the two transactions (the first check, before any migration, found nothing unknown).
    func testAnUnknownMigrationRecordedMeanwhileStopsTheNextOne() throws {
        let ran = Locked<[String]>([])
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("first") { db in
            ran.withLock { $0.append("first") }
            try db.executeUpdate(
                "INSERT INTO \(FMDatabaseMigrator.tableName) (identifier, applied) VALUES ('fromANewerVersion', 0)",
                values: nil)
        }
        migrator.registerMigration("second") { db in
            ran.withLock { $0.append("second") }
            try db.executeUpdate("CREATE TABLE second (x)", values: nil)
        }
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("in-turn.db")))
        XCTAssertThrowsError(try migrator.migrate(queue)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_ERROR), "\(error)")
            XCTAssertTrue("\(error)".contains("fromANewerVersion"), "\(error)")
        }
        XCTAssertEqual(ran.withLock { $0 }, ["first"], "the second migration did not run")
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["fromANewerVersion", "first"])
        queue.inDatabase { db in XCTAssertFalse(db.tableExists("second")) }
    }

    /// A program with no migrations left (all removed) still refuses a database that records some: the
    /// check before any migration, not only the one inside each migration's transaction.
    func testAMigratorWithoutMigrationsRefusesADatabaseThatRecordsSome() throws {
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("only") { db in try db.executeUpdate("CREATE TABLE only (x)", values: nil) }
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("none-left.db")))
        try migrator.migrate(queue)
        XCTAssertThrowsError(try FMDatabaseMigrator().migrate(queue)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_ERROR), "\(error)")
            XCTAssertTrue("\(error)".contains("only"), "\(error)")
        }
    }

    /// A database never migrated records no migration, and asking does not change it.
    func testANeverMigratedDatabaseRecordsNoMigration() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("never.db")))
        XCTAssertEqual(try FMDatabaseMigrator().appliedMigrations(queue), [])
        queue.inDatabase { db in XCTAssertFalse(db.tableExists(FMDatabaseMigrator.tableName)) }
    }
}
