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
