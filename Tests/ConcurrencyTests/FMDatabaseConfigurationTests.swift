import FMDB
import Foundation
import Logging
import TestSupport
import XCTest

/// `FMDatabaseConfiguration` reaches every connection a queue or pool opens: each field is applied.
final class FMDatabaseConfigurationTests: FMDBCipherTestCase {
    func testAPoolAppliesEveryFieldToEachConnection() throws {
        let prepared = Locked(0)
        let configuration = FMDatabaseConfiguration(
            keyProvider: PassphraseKeyProvider("configured"), logsErrors: false, busyTimeout: 7.5,
            maximumNumberOfDatabasesToCreate: 3, transactionQueueTimeout: 4,
            prepareDatabase: { db in
                prepared.withLock { $0 += 1 }
                try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
            })
        let pool = try FMDatabasePool(path: directory.path("configured.db"), configuration: configuration)
        XCTAssertEqual(pool.maximumNumberOfDatabasesToCreate, 3)
        XCTAssertEqual(pool.transactionQueueTimeout, 4)
        XCTAssertFalse(pool.logsErrors)
        XCTAssertEqual(prepared.withLock { $0 }, 1, "the keyed init opened and set up one connection")
        pool.inDatabase { outer in
            XCTAssertEqual(outer.maxBusyRetryTimeInterval, 7.5)
            XCTAssertEqual(outer.int(forQuery: "PRAGMA foreign_keys"), 1)
            pool.inDatabase { inner in
                XCTAssertFalse(inner === outer)
                XCTAssertEqual(inner.maxBusyRetryTimeInterval, 7.5)
                XCTAssertEqual(inner.int(forQuery: "PRAGMA foreign_keys"), 1)
            }
        }
        XCTAssertEqual(prepared.withLock { $0 }, 2)
        // Keyed: the file opens with the configured key only.
        pool.releaseAllDatabases()
        XCTAssertThrowsError(
            try FMDatabasePool(
                path: directory.path("configured.db"),
                configuration: FMDatabaseConfiguration(keyProvider: PassphraseKeyProvider("other")))
        ) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_NOTADB)
        }
    }

    func testAQueueAppliesItsFieldsAndThrowsItsOpenError() throws {
        let configuration = FMDatabaseConfiguration(
            keyProvider: PassphraseKeyProvider("configured"), logsErrors: false, busyTimeout: 0.25,
            prepareDatabase: { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil) })
        let queue = try FMDatabaseQueue(path: directory.path("queue.db"), configuration: configuration)
        XCTAssertFalse(queue.logsErrors)
        queue.inDatabase { db in
            XCTAssertEqual(db.maxBusyRetryTimeInterval, 0.25)
            XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1)
        }
        // Unkeyed, the queue still opens at init, and an open error is thrown rather than returned as nil.
        let missing = directory.path("no-such-directory/queue.db")
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: missing, configuration: FMDatabaseConfiguration())
        ) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_CANTOPEN)
        }
        let plain = try FMDatabaseQueue(
            path: directory.path("plain.db"), configuration: FMDatabaseConfiguration(busyTimeout: 1))
        XCTAssertEqual(plain.inDatabase { $0.maxBusyRetryTimeInterval }, 1)
    }

    /// No busy timeout configured: FMDB's 2 seconds, and what a block sets on its connection stays.
    func testWithoutABusyTimeoutTheConnectionsKeepFMDBsDefaultAndWhatABlockSets() throws {
        XCTAssertNil(FMDatabaseConfiguration().busyTimeout)
        let queue = try FMDatabaseQueue(
            path: directory.path("default.db"),
            configuration: FMDatabaseConfiguration(keyProvider: PassphraseKeyProvider("default")))
        XCTAssertEqual(queue.inDatabase { $0.maxBusyRetryTimeInterval }, 2)
        queue.inDatabase { $0.maxBusyRetryTimeInterval = 9 }
        XCTAssertEqual(queue.inDatabase { $0.maxBusyRetryTimeInterval }, 9)
    }
}
