import FMDB
import Foundation
import TestSupport
import XCTest

/// Which `inDatabase` a call gets depends on its block alone: a block that does not throw gets a
/// non-throwing form (FMDB's, or the one returning `T?`) wherever the call is written, inside
/// `XCTAssertEqual` too; a block that throws gets the throwing form returning `T`. Compiling this file
/// without errors or warnings is part of the test.
final class InDatabaseOverloadTests: FMDBCipherTestCase {
    /// A queue whose next open fails: its file was replaced by a directory after it closed.
    func makeFailingQueue(_ name: String = "failing.db") throws -> FMDatabaseQueue {
        let path = directory.path(name)
        let queue = try XCTUnwrap(FMDatabaseQueue(path: path))
        queue.close()
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return queue
    }

    /// A pool whose next connection cannot open, the same way.
    func makeFailingPool() throws -> FMDatabasePool {
        let path = directory.path("failing-pool.db")
        let pool = FMDatabasePool(path: path)
        pool.inDatabase { db in db.executeUpdate("CREATE TABLE t (x)") }
        pool.releaseAllDatabases()
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return pool
    }

    func testANonThrowingBlockInsideXCTAssertEqualNeedsNoTry() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        XCTAssertEqual(queue.inDatabase { $0.int(forQuery: "SELECT 7") }, 7)
        let pool = FMDatabasePool(path: directory.path("p.db"))
        XCTAssertEqual(pool.inDatabase { $0.int(forQuery: "SELECT 7") }, 7)
    }

    func testANonThrowingValueBlockReturnsNilWhenNoDatabaseCanBeSupplied() throws {
        let queue = try makeFailingQueue()
        let seven = queue.inDatabase { $0.int(forQuery: "SELECT 7") }
        XCTAssertNil(seven)
        XCTAssertEqual((queue.lastError as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        XCTAssertNil(queue.inDatabase { $0.int(forQuery: "SELECT 7") })

        let pool = try makeFailingPool()
        XCTAssertNil(pool.inDatabase { $0.int(forQuery: "SELECT 7") })
    }

    func testAThrowingBlockGetsTheThrowingFormEvenInsideXCTAssertEqual() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        XCTAssertEqual(
            try queue.inDatabase { db in
                let rs = try db.executeQuery("SELECT 7", values: nil)
                defer { rs.close() }
                return rs.next() ? rs.int(forColumnIndex: 0) : 0
            }, Int32(7))
        let count: Int32 = try queue.inDatabase { db in
            try db.executeUpdate("CREATE TABLE t (x)", values: nil)
            return db.int(forQuery: "SELECT count(*) FROM t")
        }
        XCTAssertEqual(count, 0)

        let failing = try makeFailingQueue()
        XCTAssertThrowsError(try failing.inDatabase { db in try db.executeUpdate("CREATE TABLE t (x)", values: nil) }) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        }
        let pool = try makeFailingPool()
        XCTAssertThrowsError(try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE u (x)", values: nil) }) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        }
    }

    /// A non-throwing block whose result is wanted as a non-optional `T` gets the throwing form: the
    /// `T?` one cannot give that type.
    func testANonOptionalResultTypeSelectsTheThrowingForm() throws {
        func seven(_ queue: FMDatabaseQueue) throws -> Int32 {
            try queue.inDatabase { $0.int(forQuery: "SELECT 7") }
        }
        func seven(_ pool: FMDatabasePool) throws -> Int32 {
            try pool.inDatabase { $0.int(forQuery: "SELECT 7") }
        }
        XCTAssertEqual(try seven(XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))), 7)
        XCTAssertEqual(try seven(FMDatabasePool(path: directory.path("p.db"))), 7)
        XCTAssertThrowsError(try seven(makeFailingQueue())) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        }
        XCTAssertThrowsError(try seven(makeFailingPool())) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        }
    }

    /// FMDB's blocks, one line (the `T?` form, its Bool unused) or several (FMDB's Void form): no `try`,
    /// and the behaviour of FMDB's form.
    func testFMDBsBlocksStayOnTheNonThrowingForms() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        queue.inDatabase { db in db.executeUpdate("CREATE TABLE t (x)") }
        queue.inDatabase { db in
            db.executeUpdate("INSERT INTO t VALUES (1)")
            db.executeUpdate("INSERT INTO t VALUES (2)")
        }
        XCTAssertEqual(queue.inDatabase { $0.int(forQuery: "SELECT sum(x) FROM t") }, 3)

        let pool = FMDatabasePool(path: directory.path("p.db"))
        pool.inDatabase { db in db.executeUpdate("CREATE TABLE t (x)") }
        pool.inDatabase { db in db.executeUpdate("INSERT INTO t VALUES (4)") }
        XCTAssertEqual(pool.inDatabase { $0.int(forQuery: "SELECT sum(x) FROM t") }, 4)

        // A failing open is kept in lastError and the block is not called, as FMDB's form does.
        let failing = try makeFailingQueue()
        var called = false
        failing.inDatabase { db in
            called = true
            db.executeUpdate("CREATE TABLE t (x)")
        }
        XCTAssertFalse(called)
        XCTAssertEqual((failing.lastError as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        let failingOneLine = try makeFailingQueue("failing-one-line.db")
        failingOneLine.inDatabase { db in db.executeUpdate("CREATE TABLE t (x)") }
        XCTAssertEqual((failingOneLine.lastError as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
    }

    func testALeakedConnectionIsTypedOptional() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("q.db")))
        let leaked: FMDatabase? = queue.inDatabase { $0 }
        XCTAssertNotNil(leaked)
    }
}
