@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// When a pool finds its file under another key, every connection keyed before goes: the idle ones at
/// once, the checked-out ones when their blocks return. So a key change fails at most the blocks that were
/// running or trusted at that moment, never a later block that gets an old connection from the pool.
final class KeyChangeDropsEveryConnectionTests: FMDBCipherTestCase {
    typealias Coordination = KeyChangeCoordinationTests

    /// A WAL file under key 1 and a pool on it whose provider reads `harness`'s key byte, with two
    /// connections that both passed the key check (trusted for the next hour: not checked again), then the
    /// file rekeyed to key 2 elsewhere: `body` runs inside that hour.
    func withTwoTrustedConnectionsOfARekeyedFile(_ body: (FMDatabasePool) throws -> Void) throws {
        let path = directory.path("two.db")
        let setUp = try FMDatabaseQueue(path: path, keyProvider: Coordination.provider(1))
        try setUp.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        setUp.close()
        let harness = Coordination.Harness(path: path)
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: harness.makeProvider(), logsErrors: false))
        let before = FMDatabase.keyCheckInterval.exchange(3_600_000_000_000, ordering: .relaxed)
        defer { FMDatabase.keyCheckInterval.store(before, ordering: .relaxed) }
        // Two connections, then each checked before a block (nested: each block takes another one).
        for _ in 0..<2 {
            try pool.inDatabase { _ in XCTAssertEqual(try pool.inDatabase(Coordination.countRows), 0) }
        }
        XCTAssertEqual(pool.countOfOpenDatabases, 2)
        let elsewhere = FMDatabase(path: path)
        XCTAssertTrue(elsewhere.open())
        try elsewhere.setKey(using: Coordination.provider(1))
        try elsewhere.rekeySafely(using: Coordination.provider(2))  // No wait: inside the hour.
        elsewhere.close()
        harness.keyByte.withLock { $0 = 2 }
        try body(pool)
    }

    /// The first block fails (its trusted connection met key 2); the other idle connection is dropped with
    /// it, so the next block is served on a new connection.
    func testTheOtherIdleConnectionIsDroppedWithTheOneThatMetAnotherKey() throws {
        try withTwoTrustedConnectionsOfARekeyedFile { pool in
            XCTAssertThrowsError(try pool.inDatabase(Coordination.countRows)) { XCTAssertEqual(nsError($0).code, 26) }
            XCTAssertEqual(try pool.inDatabase(Coordination.countRows), 0, "served on a connection under key 2")
            XCTAssertEqual(try pool.inDatabase(Coordination.countRows), 0)
        }
    }

    /// A block holds one connection while another block's connection meets key 2: the held one is closed
    /// when its block returns, not put back for a later block to fail on.
    func testAConnectionCheckedOutAtTheKeyChangeIsClosedAtCheckIn() throws {
        try withTwoTrustedConnectionsOfARekeyedFile { pool in
            try pool.inDatabase { _ in
                XCTAssertThrowsError(try pool.inDatabase(Coordination.countRows)) {
                    XCTAssertEqual(nsError($0).code, 26)
                }
            }
            XCTAssertEqual(pool.countOfOpenDatabases, 0, "both connections keyed before are closed")
            XCTAssertEqual(try pool.inDatabase(Coordination.countRows), 0, "served on a connection under key 2")
        }
    }
}
