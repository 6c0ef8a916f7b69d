import FMDB
import Foundation
import TestSupport
import XCTest

/// A connection that escaped its queue or pool block (`let leaked = queue.inDatabase { $0 }`) is
/// refused with SQLITE_MISUSE outside a block, without crashing; inside blocks it works as before.
final class LentConnectionTests: FMDBCipherTestCase {
    static let message = "this FMDatabase belongs to a queue/pool: use it only inside the block"

    func assertRefused(_ leaked: FMDatabase, file: StaticString = #filePath, line: UInt = #line) {
        leaked.logsErrors = false
        XCTAssertFalse(leaked.executeUpdate("CREATE TABLE escaped (x)"), file: file, line: line)
        XCTAssertEqual(leaked.lastErrorCode(), SQLITE_MISUSE, file: file, line: line)
        XCTAssertEqual(leaked.lastErrorMessage(), Self.message, file: file, line: line)
        XCTAssertNil(leaked.executeQuery("SELECT 1"), file: file, line: line)
        XCTAssertThrowsError(try leaked.executeUpdate("CREATE TABLE escaped (x)", values: nil), file: file, line: line)
        {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_MISUSE, file: file, line: line)
        }
    }

    func testConnectionEscapedFromAQueueBlockIsRefusedAndTheQueueStillWorks() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        let leaked = try XCTUnwrap(queue.inDatabase { $0 })
        assertRefused(leaked)
        try queue.inDatabase { db in
            XCTAssertTrue(db === leaked)
            try db.executeUpdate("CREATE TABLE t (x)", values: nil)
        }
        let tables = queue.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM sqlite_master") }
        XCTAssertEqual(tables, 1)
        queue.close()
        XCTAssertEqual(try queue.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 0)
    }

    func testConnectionEscapedFromAQueueTransactionIsRefused() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        let leaked = try queue.inTransaction(.immediate) { $0 }
        assertRefused(leaked)
    }

    func testConnectionEscapedFromAPoolBlockIsRefusedAndThePoolStillWorks() throws {
        let pool = FMDatabasePool(path: directory.path("p.db"))
        let leaked = try XCTUnwrap(pool.inDatabase { $0 })
        assertRefused(leaked)
        try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (x)", values: nil) }
        pool.releaseAllDatabases()
        XCTAssertEqual(try pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 0)
    }

    func testEscapedConnectionIsRefusedOnAnotherThreadWhileABlockUsesIt() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        nonisolated(unsafe) let leaked = try XCTUnwrap(queue.inDatabase { $0 })
        leaked.logsErrors = false
        let inBlock = DispatchSemaphore(value: 0)
        let usedOutside = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var outsideResult: Bool?
        let thread = Thread {
            inBlock.wait()
            outsideResult = leaked.executeUpdate("CREATE TABLE escaped (x)")
            usedOutside.signal()
        }
        thread.start()
        try queue.inDatabase { db in
            inBlock.signal()
            usedOutside.wait()
            // The refusal did not touch the block's connection: its own calls still work.
            try db.executeUpdate("CREATE TABLE t (x)", values: nil)
            XCTAssertEqual(db.lastErrorCode(), SQLITE_OK)
        }
        XCTAssertEqual(outsideResult, false)
    }

    func testConnectionOnItsOwnIsNeverRefused() throws {
        let db = FMDatabase(path: directory.path("plain.db"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (x)"))
    }
}
