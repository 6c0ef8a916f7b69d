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
            path: directory.path("prepare.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                prepareDatabase: { db in
                    try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
                    prepared.withLock { $0 += 1 }
                }))
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
            try FMDatabaseQueue(
                path: path,
                configuration: FMDatabaseConfiguration(
                    keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                    prepareDatabase: { _ in
                        throw SetUpFailed()
                    }))
        ) { error in
            XCTAssertTrue(error is SetUpFailed, "\(error)")
        }
        let fail = Locked(false)
        let queue = try FMDatabaseQueue(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                prepareDatabase: {
                    _ in
                    if fail.withLock({ $0 }) { throw SetUpFailed() }
                }))
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
            path: directory.path("once.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger()))
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
            path: directory.path("once.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: quiet.logger(), logsErrors: false
            ))
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
                path: path,
                configuration: FMDatabaseConfiguration(
                    keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger())))
        XCTAssertThrowsError(
            try FMDatabasePool(
                path: path,
                configuration: FMDatabaseConfiguration(
                    keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger())))
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

    // MARK: - Every configuration initializer applies the logger, logsErrors and prepareDatabase

    /// Checks that `logger`, `logsErrors` (false) and `prepareDatabase` given to an initializer reached the
    /// connection a block gets: foreign keys on, nothing logged for a failed FMDB form, the trace in `capture`.
    func checkSettingsReach(
        _ run: ((FMDatabase) -> Void) -> Void, label: String, logsErrors: Bool, capture: LogCapture, _ what: String
    ) {
        XCTAssertEqual(label, "settings", what)
        XCTAssertFalse(logsErrors, what)
        let before = capture.all.count
        run { db in
            XCTAssertFalse(db.logsErrors, "\(what): logsErrors reaches the connection")
            XCTAssertEqual(db.int(forQuery: "PRAGMA foreign_keys"), 1, "\(what): prepareDatabase ran")
            XCTAssertNil(db.executeQuery("SELECT nope"))
            db.traceExecution = true
            _ = db.int(forQuery: "SELECT 'traced'")
            db.traceExecution = false
        }
        let lines = capture.all.dropFirst(before)
        XCTAssertFalse(lines.contains { $0.hasPrefix("error") }, "\(what): \(lines)")
        XCTAssertTrue(lines.contains { $0.contains("traced") }, "\(what): the logger reaches the connection: \(lines)")
    }

    /// Every configuration initializer of the queue and the pool, keyed or not, path or URL, applies the
    /// configuration's `logger`, `logsErrors` and `prepareDatabase`; FMDB's initializers keep FMDB's defaults
    /// (label "fmdb", errors logged).
    func testEveryInitializerTakesALoggerLogsErrorsAndPrepareDatabase() throws {
        let capture = LogCapture()
        let logger = capture.logger(label: "settings")
        let prepare: @Sendable (FMDatabase) throws -> Void = { db in
            try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
        }
        let plain = directory.path("settings-plain.db")
        let plainURL = URL(fileURLWithPath: plain)
        let keyedURL = URL(fileURLWithPath: directory.path("settings-keyed.db"))
        let provider = try XCTUnwrap(StorageMode.encrypted.keyProvider)
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE

        let settings = FMDatabaseConfiguration(logger: logger, logsErrors: false, prepareDatabase: prepare)
        var keyed = settings
        keyed.keyProvider = provider
        let queues: [(String, FMDatabaseQueue)] = [
            ("queue(path: nil)", try FMDatabaseQueue(path: nil, configuration: settings)),
            ("queue(path:)", try FMDatabaseQueue(path: plain, configuration: settings)),
            ("queue(url:)", try FMDatabaseQueue(url: plainURL, configuration: settings)),
            (
                "queue(path:flags:vfs:)",
                try FMDatabaseQueue(path: plain, flags: flags, vfs: nil, configuration: settings)
            ),
            (
                "queue(url:flags:vfs:)",
                try FMDatabaseQueue(url: plainURL, flags: flags, vfs: nil, configuration: settings)
            ),
            ("queue(url:) keyed", try FMDatabaseQueue(url: keyedURL, configuration: keyed)),
        ]
        for (what, queue) in queues {
            checkSettingsReach(
                { body in queue.inDatabase { db in body(db) } }, label: queue.logger.label,
                logsErrors: queue.logsErrors, capture: capture, what)
            queue.close()
        }

        let pools: [(String, FMDatabasePool)] = [
            ("pool(path: nil)", try FMDatabasePool(path: nil, configuration: settings)),
            ("pool(path:)", try FMDatabasePool(path: plain, configuration: settings)),
            ("pool(url:)", try FMDatabasePool(url: plainURL, configuration: settings)),
            ("pool(path:flags:vfs:)", try FMDatabasePool(path: plain, flags: flags, vfs: nil, configuration: settings)),
            (
                "pool(url:flags:vfs:)",
                try FMDatabasePool(url: plainURL, flags: flags, vfs: nil, configuration: settings)
            ),
            ("pool(url:) keyed", try FMDatabasePool(url: keyedURL, configuration: keyed)),
        ]
        for (what, pool) in pools {
            checkSettingsReach(
                { body in pool.inDatabase { db in body(db) } }, label: pool.logger.label, logsErrors: pool.logsErrors,
                capture: capture, what)
            pool.releaseAllDatabases()
        }

        // The defaults are FMDB's.
        let queue = try XCTUnwrap(FMDatabaseQueue(path: plain))
        XCTAssertEqual(queue.logger.label, "fmdb")
        XCTAssertTrue(queue.logsErrors)
        queue.inDatabase { db in XCTAssertTrue(db.logsErrors) }
        let pool = FMDatabasePool(url: plainURL, flags: flags, vfs: nil)
        XCTAssertEqual(pool.logger.label, "fmdb")
        XCTAssertTrue(pool.logsErrors)
        pool.inDatabase { db in XCTAssertTrue(db.logsErrors) }
    }

    /// An unkeyed queue whose `prepareDatabase` throws at init is not made: the initializer throws that error,
    /// as when its open fails.
    func testAnUnkeyedQueueWhosePrepareDatabaseThrowsIsNotMade() {
        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: directory.path("unkeyed-throws.db"),
                configuration: FMDatabaseConfiguration(logsErrors: false, prepareDatabase: { _ in throw SetUpFailed() })
            )
        ) { XCTAssertTrue($0 is SetUpFailed, "\($0)") }
    }
}
