import FMDB
import Foundation
import TestSupport
import XCTest

/// The pool's writer affinity from its first connection on: the connection a transaction opened is the
/// writer from then on, and with two idle connections (the fewest that leave a choice) reads take the other.
final class PoolWriterAffinityTests: FMDBCipherTestCase {
    func testTheConnectionTheFirstTransactionOpenedStaysTheWriterAndReadsTakeTheOther() throws {
        let pool = try FMDatabasePool(
            path: directory.path("affinity.db"), configuration: FMDatabaseConfiguration(logsErrors: false))
        XCTAssertEqual(pool.countOfOpenDatabases, 0)
        var writer: ObjectIdentifier?
        try pool.inTransaction(.immediate) { db in
            writer = ObjectIdentifier(db)
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        // A second connection: the outer block takes the only idle one, the inner opens another.
        pool.inDatabase { _ in pool.inDatabase { _ in } }
        XCTAssertEqual(pool.countOfOpenDatabases, 2)
        for round in 0..<3 {
            pool.inDatabase { db in
                XCTAssertNotEqual(ObjectIdentifier(db), writer, "round \(round): the read takes the other one")
            }
            try pool.inTransaction(.immediate) { db in
                XCTAssertEqual(ObjectIdentifier(db), writer, "round \(round): the writer serves the transaction")
                try db.executeUpdate("insert into t values (?)", values: [round])
            }
        }
        XCTAssertEqual(pool.countOfOpenDatabases, 2, "no connection opened for it")
    }
}
