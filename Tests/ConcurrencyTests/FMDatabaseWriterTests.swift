import FMDB
import Foundation
import TestSupport
import XCTest

/// Code written once over `some FMDatabaseWriter` / `any FMDatabaseWriter` serves the queue and the pool alike.
final class FMDatabaseWriterTests: FMDBCipherTestCase {
    struct Undo: Error {}

    static func provider(_ byte: UInt8) throws -> RawKeyProvider {
        try RawKeyProvider(key: Data(repeating: byte, count: 32))
    }

    /// The values of `t`, in insertion order, read through the writer.
    static func values(_ writer: some FMDatabaseWriter) throws -> [Int64] {
        try writer.inDatabase { db in
            let rs = try db.executeQuery("SELECT v FROM t ORDER BY rowid", values: nil)
            var values: [Int64] = []
            while try rs.nextWithError() { values.append(rs.longLongInt(forColumnIndex: 0)) }
            return values
        }
    }

    /// One generic function for both types: a transaction that throws is rolled back, one that returns is
    /// committed, and the async forms do the same without blocking the task.
    static func exercise(_ writer: some FMDatabaseWriter) async throws {
        try writer.inDatabase { db in try db.executeUpdate("CREATE TABLE t (v INTEGER)", values: nil) }
        XCTAssertThrowsError(
            try writer.inTransaction(.immediate) { db in
                try db.executeUpdate("INSERT INTO t VALUES (?)", values: [1])
                throw Undo()
            }
        ) { XCTAssertTrue($0 is Undo, "\($0)") }
        XCTAssertEqual(try values(writer), [])
        let id = try writer.inTransaction(.deferred) { db in
            try db.executeUpdate("INSERT INTO t VALUES (?)", values: [2])
            return db.lastInsertRowId
        }
        XCTAssertEqual(id, 1)
        let count = try await writer.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(count, 1)
        do {
            try await writer.performTransaction(.immediate) { db in
                try db.executeUpdate("INSERT INTO t VALUES (?)", values: [3])
                throw Undo()
            }
            XCTFail("the transaction's block threw")
        } catch is Undo {}
        try await writer.performTransaction(.exclusive) { db in
            try db.executeUpdate("INSERT INTO t VALUES (?)", values: [4])
        }
        XCTAssertEqual(try values(writer), [2, 4])
        XCTAssertNil(writer.lastError)
    }

    func testOneGenericFunctionServesAKeyedQueue() async throws {
        try await Self.exercise(FMDatabaseQueue(path: path("queue.db"), keyProvider: Self.provider(1)))
    }

    func testOneGenericFunctionServesAKeyedPool() async throws {
        try await Self.exercise(FMDatabasePool(path: path("pool.db"), keyProvider: Self.provider(1)))
    }

    func testOneGenericFunctionServesPlainQueueAndPool() async throws {
        try await Self.exercise(XCTUnwrap(FMDatabaseQueue(path: path("plain-queue.db"))))
        try await Self.exercise(FMDatabasePool(path: path("plain-pool.db")))
    }

    /// The migrator takes either type as `any FMDatabaseWriter`: migrations run once, in order, are recorded,
    /// and one that throws is rolled back (its table is not there, it is not recorded).
    func testMigratorRunsThroughAnyWriterOfEitherType() throws {
        let writers: [(String, any FMDatabaseWriter)] = [
            ("queue", try FMDatabaseQueue(path: path("migrated-queue.db"), keyProvider: Self.provider(2))),
            ("pool", try FMDatabasePool(path: path("migrated-pool.db"), keyProvider: Self.provider(2))),
        ]
        for (what, writer) in writers {
            let runs = Locked(0)
            var migrator = FMDatabaseMigrator()
            migrator.registerMigration("create") { db in
                runs.withLock { $0 += 1 }
                try db.executeUpdate("CREATE TABLE t (v INTEGER)", values: nil)
            }
            try migrator.migrate(writer)
            try migrator.migrate(writer)
            XCTAssertEqual(runs.withLock { $0 }, 1, what)
            XCTAssertEqual(try migrator.appliedMigrations(writer), ["create"], what)

            var failing = migrator
            failing.registerMigration("half") { db in
                try db.executeUpdate("CREATE TABLE half (v INTEGER)", values: nil)
                throw Undo()
            }
            XCTAssertThrowsError(try failing.migrate(writer), what) { XCTAssertTrue($0 is Undo, "\(what): \($0)") }
            XCTAssertEqual(try failing.appliedMigrations(writer), ["create"], what)
            let halfExists = try writer.inDatabase { db in db.tableExists("half") }
            XCTAssertFalse(halfExists, what)

            // A database migrated further than this code knows is refused before anything runs.
            var later = migrator
            later.registerMigration("later") { db in
                try db.executeUpdate("CREATE TABLE later (v INTEGER)", values: nil)
            }
            try later.migrate(writer)
            XCTAssertThrowsError(try FMDatabaseMigrator().migrate(writer), what) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_ERROR, what)
            }
        }
    }

    /// The async key changes, written once for both types, rekey the file and switch the writer to the new
    /// provider: a fresh queue opens the file with the new key only.
    func testAsyncRekeyThroughAnyWriterOfEitherType() async throws {
        for (name, isPool) in [("rekeyed-queue.db", false), ("rekeyed-pool.db", true)] {
            let file = path(name)
            let writer: any FMDatabaseWriter =
                isPool
                ? try FMDatabasePool(path: file, keyProvider: Self.provider(3))
                : try FMDatabaseQueue(path: file, keyProvider: Self.provider(3))
            try writer.inDatabase { db in try db.executeUpdate("CREATE TABLE t (v INTEGER)", values: nil) }
            let outcome = try await writer.rekey(using: Self.provider(4))
            XCTAssertEqual(outcome, .done, name)
            try await writer.perform { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) }
            XCTAssertThrowsError(try FMDatabaseQueue(path: file, keyProvider: Self.provider(3)), name)
            let reopened = try FMDatabaseQueue(path: file, keyProvider: Self.provider(4))
            XCTAssertEqual(try Self.values(reopened), [1], name)
        }
    }
}
