import FMDB
import Foundation
import TestSupport
import XCTest

/// `FMErrorDisposition`, the one way to decide whether to run a block again, on the errors the library
/// really throws; and the async forms of the key changes a service makes.
final class ErrorDispositionTests: FMDBCipherTestCase {
    /// A WAL database under key byte 1 with a table `t` of unique values.
    private func makeKeyed(_ name: String) throws -> String {
        try makeKeyedDatabase(name, provider: KeyChangeCoordinationTests.provider(1)) { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer unique)", values: nil)
        }
    }

    func testALockHeldElsewhereIsTransient() throws {
        let path = try makeKeyed("busy.db")
        let holder = FMDatabase(path: path)
        XCTAssertTrue(holder.open())
        defer { holder.close() }
        try holder.setKey(using: KeyChangeCoordinationTests.provider(1))
        XCTAssertTrue(holder.beginImmediateTransaction())
        let queue = try FMDatabaseQueue(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: KeyChangeCoordinationTests.provider(1), logsErrors: false))
        defer { queue.close() }
        XCTAssertThrowsError(
            try queue.inDatabase { db in
                db.maxBusyRetryTimeInterval = 0
                try db.executeUpdate("insert into t values (1)", values: nil)
            }
        ) { XCTAssertEqual(FMErrorDisposition($0), .transient, "\($0)") }
        XCTAssertTrue(holder.rollback())
    }

    func testAPoolTransactionThatWaitedPastItsQueueTimeoutIsTransient() throws {
        let path = try makeKeyed("gate.db")
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: KeyChangeCoordinationTests.provider(1), logsErrors: false))
        defer { pool.releaseAllDatabases() }
        pool.transactionQueueTimeout = 0
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Thread {
            try? pool.inTransaction(.immediate) { _ in
                started.signal()
                release.wait()
            }
        }
        holder.start()
        started.wait()
        XCTAssertThrowsError(try pool.inTransaction(.immediate) { _ in XCTFail("must not run") }) {
            XCTAssertEqual(FMErrorDisposition($0), .transient, "\($0)")
        }
        release.signal()
    }

    func testSQLConstraintAndWrongKeyErrorsArePermanent() throws {
        let path = try makeKeyed("permanent.db")
        let queue = try FMDatabaseQueue(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: KeyChangeCoordinationTests.provider(1), logsErrors: false))
        defer { queue.close() }
        XCTAssertThrowsError(
            try queue.inDatabase { db in try db.executeUpdate("insert into nope values (1)", values: nil) }
        ) {
            XCTAssertEqual(FMErrorDisposition($0), .permanent, "\($0)")
        }
        try queue.inDatabase { db in try db.executeUpdate("insert into t values (1)", values: nil) }
        XCTAssertThrowsError(
            try queue.inDatabase { db in try db.executeUpdate("insert into t values (1)", values: nil) }
        ) { XCTAssertEqual(FMErrorDisposition($0), .permanent, "\($0)") }
        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: path,
                configuration: FMDatabaseConfiguration(
                    keyProvider: KeyChangeCoordinationTests.provider(9), logsErrors: false))
        ) { XCTAssertEqual(FMErrorDisposition($0), .permanent, "a wrong key: \($0)") }
        XCTAssertEqual(FMErrorDisposition(NSError(domain: "elsewhere", code: Int(SQLITE_BUSY))), .permanent)
    }

    /// A transaction SQLite rolled back takes its cause's disposition: a constraint's, here.
    func testARolledBackTransactionHasItsCausesDisposition() throws {
        let path = try makeKeyed("rolledback.db")
        let queue = try FMDatabaseQueue(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: KeyChangeCoordinationTests.provider(1), logsErrors: false))
        defer { queue.close() }
        try queue.inDatabase { db in try db.executeUpdate("insert into t values (1)", values: nil) }
        XCTAssertThrowsError(
            try queue.inTransaction(.immediate) { db in
                _ = db.executeUpdate("insert or rollback into t values (1)")
                try db.executeUpdate("insert into t values (2)", values: nil)
            }
        ) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.transactionWasRolledBack, true, "\(error)")
            XCTAssertEqual(FMErrorDisposition(error), .permanent, "\(error)")
        }
        XCTAssertEqual(FMErrorDisposition(FMDatabaseError(code: SQLITE_BUSY)), .transient)
    }

    func testACancelledCallAndAnInterruptedStatementAreCancelled() async throws {
        let path = try makeKeyed("cancelled.db")
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: KeyChangeCoordinationTests.provider(1), logsErrors: false))
        defer { pool.releaseAllDatabases() }
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pool.perform { db in db.int(forQuery: "select count(*) from t") }
        }
        do {
            _ = try await task.value
            XCTFail("a cancelled call throws")
        } catch {
            XCTAssertEqual(FMErrorDisposition(error), .cancelled, "\(error)")
        }
        XCTAssertEqual(FMErrorDisposition(FMDatabaseError(code: SQLITE_INTERRUPT)), .cancelled)
    }

    /// A block stopped by a key change elsewhere: its connection was replaced, and once the service has the
    /// new key (the async reload), the same block runs.
    func testABlockStoppedByAKeyChangeElsewhereIsConnectionReplaced() async throws {
        let path = try makeKeyed("replaced.db")
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: KeyChangeCoordinationTests.provider(1), logsErrors: false))
        defer { pool.releaseAllDatabases() }
        let block: @Sendable (FMDatabase) throws -> Int32 = { db in
            try db.executeUpdate("insert into t values (7)", values: nil)
            return db.int(forQuery: "select count(*) from t")
        }
        do {
            _ = try await pool.perform { db in
                try KeyChangeCoordinationTests.rekeyElsewhere(path, from: 1, to: 2)
                return try block(db)
            }
            XCTFail("the block wrote under a key the file is not under")
        } catch {
            XCTAssertEqual(FMErrorDisposition(error), .connectionReplaced, "\(error)")
        }
        do {
            try await pool.replaceKeyProvider(KeyChangeCoordinationTests.provider(9))
            XCTFail("a provider whose key does not open the file is refused")
        } catch {
            XCTAssertEqual(nsError(error).code, Int(SQLITE_NOTADB), "\(error)")
        }
        try await pool.replaceKeyProvider(KeyChangeCoordinationTests.provider(2))
        let count = try await pool.perform(block)
        XCTAssertEqual(count, 1, "run again once, it wrote once")
    }

    func testAsyncRekeyOfAQueueAndAPoolChangesTheKeyOfTheFile() async throws {
        let path = try makeKeyed("rekey.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeyChangeCoordinationTests.provider(1))
        let outcome = try await queue.rekey(using: KeyChangeCoordinationTests.provider(2))
        XCTAssertEqual(outcome, .done)
        let rows = try await queue.perform { db in db.int(forQuery: "select count(*) from t") }
        XCTAssertEqual(rows, 0)
        queue.close()
        let pool = try FMDatabasePool(path: path, keyProvider: KeyChangeCoordinationTests.provider(2))
        defer { pool.releaseAllDatabases() }
        let poolOutcome = try await pool.rekey(using: KeyChangeCoordinationTests.provider(3))
        XCTAssertEqual(poolOutcome, .done)
        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: path,
                configuration: FMDatabaseConfiguration(
                    keyProvider: KeyChangeCoordinationTests.provider(2), logsErrors: false)),
            "the old key no longer opens the file")
        let reopened = try FMDatabaseQueue(path: path, keyProvider: KeyChangeCoordinationTests.provider(3))
        reopened.close()
    }
}
