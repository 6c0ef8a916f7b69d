@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// What a long-running service relies on from a queue: its connection is set up before any block.
final class FMDatabaseQueueServiceTests: FMDBCipherTestCase {
    struct SetUpFailed: Error {}

    func testPrepareDatabaseSetsUpTheConnectionEachTimeItOpens() throws {
        let prepared = Locked(0)
        let queue = try FMDatabaseQueue(
            path: directory.path("prepare.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider)
        ) { db in
            try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
            prepared.withLock { $0 += 1 }
        }
        XCTAssertEqual(prepared.withLock { $0 }, 1)
        queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1) }
        queue.close()
        queue.inDatabase { db in
            XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1, "set up again after close()")
        }
        XCTAssertEqual(prepared.withLock { $0 }, 2)
        try queue.rekey(using: PassphraseKeyProvider("new key"))
        queue.inDatabase { db in
            XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1, "still set up after a rekey")
        }
    }

    func testPrepareDatabaseThatThrowsFailsTheCallThatNeededTheConnection() throws {
        let path = directory.path("throws.db")
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: path, keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider)) { _ in
                throw SetUpFailed()
            }
        ) { error in
            XCTAssertTrue(error is SetUpFailed, "\(error)")
        }
        let fail = Locked(false)
        let queue = try FMDatabaseQueue(path: path, keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider)) {
            _ in
            if fail.withLock({ $0 }) { throw SetUpFailed() }
        }
        queue.close()
        fail.withLock { $0 = true }
        var ran = false
        XCTAssertThrowsError(
            try queue.inDatabase { _ in
                ran = true; try Task.checkCancellation()
            }
        ) { error in
            XCTAssertTrue(error is SetUpFailed, "\(error)")
        }
        queue.inDatabase { _ in ran = true }
        XCTAssertFalse(ran, "no block got the connection that failed its set-up")
        fail.withLock { $0 = false }
        queue.inDatabase { _ in ran = true }
        XCTAssertTrue(ran)
    }

    // MARK: - Errors are reported once

    func errorLines(_ capture: LogCapture) -> [String] { capture.all.filter { $0.hasPrefix("error") } }

    /// A UNIQUE violation the caller catches from a throwing form is not also logged; the FMDB Bool form
    /// still logs it (FMDB's `logsErrors`), and not when the queue was told not to.
    func testAnErrorTheCallerCatchesIsNotAlsoLogged() async throws {
        let capture = LogCapture()
        let queue = try FMDatabaseQueue(
            path: directory.path("once.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
            logger: capture.logger())
        try queue.inDatabase { db in
            try db.executeUpdate("CREATE TABLE t (a UNIQUE)", values: nil);
            try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
        }
        XCTAssertThrowsError(
            try queue.inDatabase { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) }
        ) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_CONSTRAINT))
        }
        XCTAssertThrowsError(
            try queue.inTransaction(.immediate) { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) })
        do {
            try await queue.perform { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) }
            XCTFail("no error")
        } catch {}
        XCTAssertEqual(errorLines(capture), [], "a thrown error is the caller's to report")
        queue.inDatabase { db in XCTAssertFalse(db.executeUpdate("INSERT INTO t VALUES (1)")) }
        XCTAssertEqual(errorLines(capture).count, 3, "the Bool form logs, as FMDB: \(capture.all)")

        let quiet = LogCapture()
        let silent = try FMDatabaseQueue(
            path: directory.path("once.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
            logger: quiet.logger(),
            logsErrors: false)
        silent.inDatabase { db in
            XCTAssertFalse(db.logsErrors, "the setting reaches the connection")
            XCTAssertFalse(db.executeUpdate("INSERT INTO t VALUES (1)"))
            db.traceExecution = true
            _ = db.int(forQuery: "SELECT 1")
        }
        XCTAssertEqual(errorLines(quiet), [])
        XCTAssertTrue(quiet.all.contains { $0.contains("SELECT 1") }, "the logger reaches the connection: \(quiet.all)")
    }

    func testAFailedOpenTheCallerCatchesIsNotAlsoLogged() throws {
        let capture = LogCapture()
        let path = directory.path("no-such-dir/x.db")
        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: path, keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger()))
        XCTAssertThrowsError(
            try FMDatabasePool(
                path: path, keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger()))
        XCTAssertEqual(errorLines(capture), [])
    }

    func testFMDatabaseThrowingFormsDoNotLog() throws {
        let capture = LogCapture()
        let db = FMDatabase(path: directory.path("db.db"))
        db.logger = capture.logger()
        XCTAssertTrue(db.open())
        try db.executeUpdate("CREATE TABLE t (a UNIQUE)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
        XCTAssertThrowsError(try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil))
        XCTAssertThrowsError(try db.executeQuery("SELECT nope FROM t", values: nil))
        XCTAssertEqual(errorLines(capture), [])
        XCTAssertEqual(db.lastErrorCode(), SQLITE_ERROR, "still kept for lastError()")
        XCTAssertNil(db.executeQuery("SELECT nope FROM t"))
        XCTAssertEqual(errorLines(capture).count, 3)
        db.close()
    }
}
