import FMDB
import Foundation
import TestSupport
import XCTest

/// A queue or pool that lets a connection go closes it then, though between blocks every other use of it
/// is refused: a connection the program still holds a reference to is closed, not left open.
final class ReleasedConnectionTests: FMDBCipherTestCase {
    func testThePoolClosesTheConnectionsItReleases() throws {
        let pool = try FMDatabasePool(
            path: directory.path("pool.db"), configuration: FMDatabaseConfiguration(logsErrors: false))
        var held: FMDatabase?
        pool.inDatabase { db in held = db }
        XCTAssertEqual(held?.isOpen, true)
        pool.releaseAllDatabases()
        XCTAssertEqual(held?.isOpen, false, "closed when the pool let it go")
        XCTAssertEqual(pool.countOfOpenDatabases, 0)
    }

    func testTheQueueClosesItsConnectionWhenClosed() throws {
        let queue = try FMDatabaseQueue(
            path: directory.path("queue.db"), configuration: FMDatabaseConfiguration(logsErrors: false))
        var held: FMDatabase?
        queue.inDatabase { db in held = db }
        XCTAssertEqual(held?.isOpen, true)
        queue.close()
        XCTAssertEqual(held?.isOpen, false, "closed with the queue")
    }
}
