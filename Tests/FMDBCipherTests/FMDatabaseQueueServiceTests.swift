// Sanitizer: thread (Scripts/test runs this file's test classes under ThreadSanitizer)
@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// What a long-running service relies on from a queue: its connection is set up before any block.
final class FMDatabaseQueueServiceTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory("fmdb-queue-service")
    }

    override func tearDown() {
        directory = nil
    }

    struct SetUpFailed: Error {}

    func testPrepareDatabaseSetsUpTheConnectionEachTimeItOpens() throws {
        let prepared = Locked(0)
        let queue = try FMDatabaseQueue(path: directory.path("prepare.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider)) { db in
            try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
            prepared.withLock { $0 += 1 }
        }
        XCTAssertEqual(prepared.withLock { $0 }, 1)
        queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1) }
        queue.close()
        queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1, "set up again after close()") }
        XCTAssertEqual(prepared.withLock { $0 }, 2)
        try queue.rekey(using: PassphraseKeyProvider("new key"))
        queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1, "still set up after a rekey") }
    }

    func testPrepareDatabaseThatThrowsFailsTheCallThatNeededTheConnection() throws {
        let path = directory.path("throws.db")
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider)) { _ in
            throw SetUpFailed()
        }) { error in
            XCTAssertTrue(error is SetUpFailed, "\(error)")
        }
        let fail = Locked(false)
        let queue = try FMDatabaseQueue(path: path, keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider)) { _ in
            if fail.withLock({ $0 }) { throw SetUpFailed() }
        }
        queue.close()
        fail.withLock { $0 = true }
        var ran = false
        XCTAssertThrowsError(try queue.inDatabase { _ in ran = true; try Task.checkCancellation() }) { error in
            XCTAssertTrue(error is SetUpFailed, "\(error)")
        }
        queue.inDatabase { _ in ran = true }
        XCTAssertFalse(ran, "no block got the connection that failed its set-up")
        fail.withLock { $0 = false }
        queue.inDatabase { _ in ran = true }
        XCTAssertTrue(ran)
    }
}
