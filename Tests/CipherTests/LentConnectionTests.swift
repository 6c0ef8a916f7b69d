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
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 0)
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
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 0)
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

    func testEscapedConnectionUseIsLoggedLoudlyInEveryFormAndFailsWithMisuse() throws {
        let capture = LogCapture()
        let queue = try FMDatabaseQueue(
            path: directory.path("logged.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger()))
        let leaked = try XCTUnwrap(queue.inDatabase { $0 })
        XCTAssertTrue(leaked.logsErrors)
        let loud = "used outside the queue/pool block it was lent to (it escaped the block): refused with SQLITE_MISUSE"
        func refusals() -> [String] { capture.all.filter { $0.contains(loud) } }

        XCTAssertThrowsError(try leaked.executeUpdate("CREATE TABLE escaped (x)", values: nil)) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_MISUSE)
        }
        XCTAssertEqual(refusals().count, 1, "\(capture.all)")
        XCTAssertTrue(refusals().first?.hasPrefix("error ") ?? false, "logged at error level: \(refusals())")

        XCTAssertFalse(leaked.executeUpdate("CREATE TABLE escaped (x)"))
        XCTAssertEqual(leaked.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertEqual(refusals().count, 2, "\(capture.all)")
        // Once per refusal: the FMDB form's own error lines do not repeat it.
        XCTAssertFalse(capture.all.contains { $0.contains("DB Error") }, "\(capture.all)")

        // The typed and transaction forms are refused, and logged, the same way.
        XCTAssertThrowsError(try leaked.execute("CREATE TABLE escaped (x)")) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_MISUSE)
        }
        XCTAssertFalse(leaked.beginTransaction())
        XCTAssertEqual(refusals().count, 4, "\(capture.all)")

        XCTAssertFalse(leaked.close(), "an escaped connection is not closed")
        XCTAssertEqual(leaked.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertEqual(refusals().count, 5, "\(capture.all)")
        XCTAssertTrue(leaked.isOpen)
        // The queue's own connection still works.
        XCTAssertEqual(queue.inDatabase { $0.int(forQuery: "SELECT 7") }, 7)

        leaked.logsErrors = false
        XCTAssertNil(leaked.executeQuery("SELECT 1"))
        XCTAssertEqual(refusals().count, 5, "logsErrors off: no line")
    }

    func testConnectionOnItsOwnIsNeverRefused() throws {
        let db = FMDatabase(path: directory.path("plain.db"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (x)"))
    }
}
