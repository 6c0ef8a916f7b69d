import FMDB
import Foundation
import TestSupport
import XCTest

/// `FMDatabasePool.statistics`: what only the pool knows (connections by state, checkouts, key checks,
/// key changes).
final class PoolStatisticsTests: FMDBCipherTestCase {
    func testCountsConnectionsCheckoutsAndKeyChecks() throws {
        let path = try makeServiceDatabase(key: 1)
        let pool = try FMDatabasePool(path: path, keyProvider: rawProvider(1))
        let start = pool.statistics
        XCTAssertEqual(start.openConnections, 1, "a keyed pool opens its first connection at init")
        XCTAssertEqual(start.idleConnections, 1)
        XCTAssertEqual(start.checkouts, 0)
        XCTAssertEqual(start.keyChecks, 0)
        usleep(2_000)  // The init's own read of the file is more than the 1 ms key check interval ago.
        for _ in 0..<3 {
            pool.inDatabase { db in
                let inside = pool.statistics
                XCTAssertEqual(inside.checkedOutConnections, 1)
                XCTAssertEqual(inside.idleConnections, 0)
                _ = db.int(forQuery: "SELECT count(*) FROM t")
            }
            usleep(2_000)  // Past the 1 ms key check interval.
        }
        let after = pool.statistics
        XCTAssertEqual(after.checkouts, 3)
        XCTAssertEqual(after.keyChecks, 3, "one key check before each block")
        XCTAssertEqual(after.keyChangesSeen, 0)
        XCTAssertEqual(after.waitingCalls, 0)
        XCTAssertEqual(after.waitTime, .zero, "nobody waited")
    }

    func testCountsAKeyChangeMetElsewhere() throws {
        let path = try makeServiceDatabase(key: 1)
        let pool = try FMDatabasePool(path: path, keyProvider: rawProvider(1))
        pool.inDatabase { _ in }
        try rekeyAsAnOperator(path, from: 1, to: 2)
        usleep(2_000)
        XCTAssertThrowsError(try pool.inDatabase { db in try db.execute("SELECT 1") }) { error in
            XCTAssertEqual(resultCode(error), SQLITE_NOTADB)
        }
        XCTAssertGreaterThanOrEqual(pool.statistics.keyChangesSeen, 1)
    }

    func testLoggablePathHidesAURIQuery() {
        XCTAssertEqual(FMDatabasePool.loggablePath("/var/lib/app.db"), "/var/lib/app.db")
        XCTAssertEqual(
            FMDatabasePool.loggablePath("file:/var/lib/app.db?key=secret"), "file:/var/lib/app.db?(query not shown)")
    }
}
