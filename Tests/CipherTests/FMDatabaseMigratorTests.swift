@testable import FMDB
import Foundation
import TestSupport
import XCTest

final class FMDatabaseMigratorTests: FMDBCipherTestCase {
    static let hex = String(repeating: "2b", count: 32)

    struct Failed: Error {}

    /// The helper's key: the hex text as key material.
    static func provider() throws -> RawKeyProvider {
        var text = hex
        return try text.withUTF8 { try RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) }
    }

    func baseMigrator(log: Locked<[String]>) -> FMDatabaseMigrator {
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("createParents") { db in
            log.withLock { $0.append("createParents") }
            try db.executeUpdate("CREATE TABLE parent (id INTEGER PRIMARY KEY)", values: nil)
        }
        migrator.registerMigration("createChildren") { db in
            log.withLock { $0.append("createChildren") }
            try db.executeUpdate(
                "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id))", values: nil)
        }
        return migrator
    }

    func testMigrationsRunOnceInOrderAndAreRecorded() throws {
        let log = Locked<[String]>([])
        let path = directory.path("once.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: try Self.provider())
        var migrator = baseMigrator(log: log)
        try migrator.migrate(queue)
        try migrator.migrate(queue)
        XCTAssertEqual(log.withLock { $0 }, ["createParents", "createChildren"])
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["createParents", "createChildren"])
        // A later version adds one: only it runs, through a pool this time.
        migrator.registerMigration("addName") { db in
            log.withLock { $0.append("addName") }
            try db.executeUpdate("ALTER TABLE parent ADD COLUMN name TEXT", values: nil)
        }
        queue.close()
        let pool = try FMDatabasePool(path: path, keyProvider: try Self.provider())
        try migrator.migrate(pool)
        XCTAssertEqual(log.withLock { $0 }, ["createParents", "createChildren", "addName"])
        XCTAssertEqual(try migrator.appliedMigrations(pool), ["createParents", "createChildren", "addName"])
    }

    func testAFailingMigrationIsRolledBackAndNotRecorded() throws {
        let log = Locked<[String]>([])
        let queue = try FMDatabaseQueue(path: directory.path("fail.db"), keyProvider: try Self.provider())
        var migrator = baseMigrator(log: log)
        migrator.registerMigration("breaks") { db in
            try db.executeUpdate("CREATE TABLE half (x)", values: nil)
            throw Failed()
        }
        XCTAssertThrowsError(try migrator.migrate(queue)) { XCTAssertTrue($0 is Failed, "\($0)") }
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["createParents", "createChildren"])
        queue.inDatabase { db in XCTAssertFalse(db.tableExists("half"), "rolled back") }
    }

    func testAForeignKeyViolationRollsTheMigrationBack() throws {
        let log = Locked<[String]>([])
        let queue = try FMDatabaseQueue(path: directory.path("fk.db"), keyProvider: try Self.provider())
        var migrator = baseMigrator(log: log)
        migrator.registerMigration("orphan") { db in
            try db.executeUpdate("INSERT INTO child (id, parent) VALUES (1, 42)", values: nil)
        }
        XCTAssertThrowsError(try migrator.migrate(queue)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_CONSTRAINT))
            XCTAssertTrue("\(error)".contains("orphan"), "\(error)")
        }
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["createParents", "createChildren"])
        queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM child"), 0) }
    }

    func testADatabaseMigratedByANewerVersionIsRefused() throws {
        let log = Locked<[String]>([])
        let queue = try FMDatabaseQueue(path: directory.path("newer.db"), keyProvider: try Self.provider())
        var newer = baseMigrator(log: log)
        newer.registerMigration("fromTheFuture") { db in try db.executeUpdate("CREATE TABLE future (x)", values: nil) }
        try newer.migrate(queue)
        var older = FMDatabaseMigrator()
        older.registerMigration("createParents") { _ in XCTFail("must not run") }
        XCTAssertThrowsError(try older.migrate(queue)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_ERROR))
            XCTAssertTrue("\(error)".contains("fromTheFuture"), "\(error)")
        }
    }

    /// Runs the test helper's `scenario` on `path` and SIGKILLs it once it printed `word`; false (after a
    /// failure) when it never did.
    func killHelper(_ scenario: String, on path: String, after word: String) throws -> Bool {
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: helper)
        process.arguments = [scenario, path, Self.hex]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reached = waitForOutput(of: process, on: output, containing: word, within: 60)
        guard reached.found else {
            process.terminate()
            XCTFail("\(scenario) did not print \(word): \(reached.seen)")
            return false
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal)
        return true
    }

    /// SIGKILL in the middle of a migration: the database holds what the migrations before it did, and
    /// nothing of it; migrating again applies it.
    func testAKillMidMigrationLeavesTheStateBeforeIt() throws {
        let path = directory.path("killed.db")
        guard try killHelper("migrate-and-hang", on: path, after: "migrating") else { return }

        let queue = try FMDatabaseQueue(path: path, keyProvider: try Self.provider())
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("first") { db in try db.executeUpdate("CREATE TABLE a (x)", values: nil) }
        migrator.registerMigration("second") { db in
            try db.executeUpdate("CREATE TABLE b (x)", values: nil)
            try db.executeUpdate("INSERT INTO b VALUES (1)", values: nil)
        }
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["first"])
        queue.inDatabase { db in
            XCTAssertTrue(db.tableExists("a"))
            XCTAssertFalse(db.tableExists("b"), "nothing of the killed migration")
            XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok")
        }
        try migrator.migrate(queue)
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["first", "second"])
        queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM b"), 1) }
    }

    /// SIGKILL right after a migration's COMMIT: the database holds it, recorded, and migrating again does
    /// not run it again.
    func testAKillAfterAMigrationCommittedLeavesTheStateAfterIt() throws {
        let path = directory.path("killed-after.db")
        guard try killHelper("migrate-and-stop", on: path, after: "migrated") else { return }

        let queue = try FMDatabaseQueue(path: path, keyProvider: try Self.provider())
        let runs = Locked(0)
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("first") { _ in runs.withLock { $0 += 1 } }
        migrator.registerMigration("second") { _ in runs.withLock { $0 += 1 } }
        XCTAssertEqual(try migrator.appliedMigrations(queue), ["first", "second"])
        queue.inDatabase { db in
            XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM b"), 1000, "all of the committed migration")
            XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok")
        }
        try migrator.migrate(queue)
        XCTAssertEqual(runs.withLock { $0 }, 0, "a committed migration is not run again")
    }

    /// Two processes migrating the same file at once (Migrations.md, "Several processes"): each
    /// migration is applied once, by one of them, and recorded once, in order.
    func testTwoProcessesMigratingAtOnceApplyEachMigrationOnce() throws {
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        for round in 0..<3 {
            let path = directory.path("race-\(round).db")
            let setup = try FMDatabaseQueue(path: path, keyProvider: try Self.provider())
            setup.inDatabase { db in
                XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = wal"), "wal")
            }
            setup.close()
            var processes: [(process: Process, input: Pipe, output: Pipe)] = []
            for _ in 0..<2 {
                let process = Process()
                let input = Pipe()
                let output = Pipe()
                process.executableURL = URL(fileURLWithPath: helper)
                process.arguments = ["migrate-race", path, Self.hex]
                process.standardInput = input
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                try process.run()
                processes.append((process, input, output))
            }
            for entry in processes {
                let ready = waitForOutput(of: entry.process, on: entry.output, containing: "ready", within: 60)
                XCTAssertTrue(ready.found, "\(ready.seen)")
            }
            for entry in processes { entry.input.fileHandleForWriting.write(Data("go\n".utf8)) }
            for entry in processes {
                entry.process.waitUntilExit()
                XCTAssertEqual(entry.process.terminationStatus, 0, "round \(round): both processes migrate")
            }

            let names = (0...5).map { "m\($0)" }
            var migrator = FMDatabaseMigrator()
            for name in names { migrator.registerMigration(name) { _ in XCTFail("\(name) ran again") } }
            XCTAssertEqual(try migrator.appliedMigrations(setup), names, "round \(round)")
            setup.inDatabase { db in
                for name in names {
                    XCTAssertEqual(
                        db.int(forQuery: "SELECT count(*) FROM log WHERE name = ?", name), 1, "round \(round): \(name)")
                }
                for index in 1...5 {
                    XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM rows\(index)"), 200, "round \(round)")
                }
            }
            try migrator.migrate(setup)
        }
    }
}
