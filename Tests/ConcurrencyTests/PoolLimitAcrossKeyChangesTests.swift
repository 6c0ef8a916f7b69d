import FMDB
import Foundation
import TestSupport
import XCTest

/// `maximumNumberOfDatabasesToCreate` holds across key changes: a connection a block still holds from before a
/// `replaceKeyProvider` counts toward the limit until it is checked in and closed.
final class PoolLimitAcrossKeyChangesTests: FMDBCipherTestCase {
    func testAReplacementWhileABlockRunsOpensNoConnectionPastTheLimit() throws {
        let provider = try KeyChangeCoordinationTests.provider(1)
        let pool = try FMDatabasePool(
            path: directory.path("limit.db"),
            configuration: FMDatabaseConfiguration(keyProvider: provider, logsErrors: false))
        pool.maximumNumberOfDatabasesToCreate = 1
        try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (v INTEGER)", values: nil) }

        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let group = DispatchGroup()
        group.enter()
        Thread.detachNewThread {
            pool.inDatabase { _ in
                holding.signal()
                release.wait()
            }
            group.leave()
        }
        XCTAssertEqual(holding.wait(timeout: .now() + 5), .success)
        try pool.replaceKeyProvider(try KeyChangeCoordinationTests.provider(1))
        XCTAssertEqual(pool.countOfOpenDatabases, 1, "the replacement's checked connection is not kept past the limit")

        let second = DispatchSemaphore(value: 0)
        let secondCount = Locked(0)
        group.enter()
        Thread.detachNewThread {
            pool.inDatabase { db in
                secondCount.withLock { $0 = pool.countOfCheckedOutDatabases }
                XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t"), 0)
                second.signal()
            }
            group.leave()
        }
        XCTAssertEqual(
            second.wait(timeout: .now() + 0.3), .timedOut, "a second block waits while the first holds the one place")
        release.signal()
        XCTAssertEqual(second.wait(timeout: .now() + 5), .success, "it runs once the first connection is back")
        group.wait()
        XCTAssertEqual(secondCount.withLock { $0 }, 1)
        XCTAssertLessThanOrEqual(pool.countOfOpenDatabases, 1)
    }
}
