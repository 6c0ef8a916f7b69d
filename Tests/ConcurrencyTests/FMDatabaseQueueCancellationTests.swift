@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// `perform` and `performTransaction` of queues and pools honour Task cancellation: the running
/// statement is interrupted, the transaction rolled back, the call throws CancellationError, and the
/// connection stays usable. (Named for the queue and pool test filters.)
final class FMDatabaseQueueCancellationTests: FMDBCipherTestCase {
    /// Tens of seconds of work unless interrupted.
    static let longQuery =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) FROM c"

    /// Inserts a row, then runs the long query; `started` turns true just before the query.
    static func longBlock(_ started: Locked<Bool>) -> @Sendable (FMDatabase) throws -> Int32 {
        { db in
            try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
            started.withLock { $0 = true }
            let rs = try db.executeQuery(longQuery, values: nil)
            _ = try rs.nextWithError()
            return rs.int(forColumnIndex: 0)
        }
    }

    /// Starts `call` in a task, cancels it once its long query runs, and returns how long the call took
    /// to return after `cancel()`, and the error it ended with.
    func cancelWhileRunning(_ call: @escaping @Sendable (Locked<Bool>) async throws -> Int32) async throws -> (
        TimeInterval, Error?
    ) {
        let started = Locked(false)
        let task = Task { try await call(started) }
        while !started.withLock({ $0 }) { try await Task.sleep(nanoseconds: 1_000_000) }
        try await Task.sleep(nanoseconds: 50_000_000)  // Well into the query.
        let start = Date()
        task.cancel()
        let result = await task.result
        let elapsed = Date().timeIntervalSince(start)
        if case .failure(let error) = result { return (elapsed, error) }
        return (elapsed, nil)
    }

    func report(_ what: String, _ elapsed: TimeInterval) {
        print(String(format: "cancel-to-return %@: %.1f ms", what, elapsed * 1000))
    }

    /// A block that closes and reopens its own connection, then is cancelled: the interrupt must not reach
    /// the closed (freed) handle. (AddressSanitizer reports the use after free this guards against.)
    func testCancellingABlockThatReopenedItsConnectionIsSafe() async throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("reopen.db")))
        defer { queue.close() }
        let started = Locked(false)
        let task = Task {
            try await queue.perform { db -> Int32 in
                db.close()
                _ = db.open()
                started.withLock { $0 = true }
                // Some work on the new connection, short enough to run to its end: the interrupt, sent
                // through the closed connection's handle, is dropped.
                let rs = try db.executeQuery(
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c",
                    values: nil)
                _ = try rs.nextWithError()
                return rs.int(forColumnIndex: 0)
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(nanoseconds: 1_000_000) }
        task.cancel()
        let result = await task.result
        if case .success = result { XCTFail("a cancelled call must not succeed") }
    }

    func testCancellingAQueueTransactionInterruptsAndRollsBack() async throws {
        for mode in StorageMode.allCases {
            let path = directory.path("\(mode)-queue.db")
            let queue: FMDatabaseQueue
            if let provider = mode.keyProvider {
                queue = try FMDatabaseQueue(path: path, keyProvider: provider)
            } else {
                queue = try XCTUnwrap(FMDatabaseQueue(path: path))
            }
            try queue.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
            let (elapsed, error) = try await cancelWhileRunning { started in
                try await queue.performTransaction(.immediate, Self.longBlock(started))
            }
            report("queue.performTransaction (\(mode))", elapsed)
            XCTAssertTrue(error is CancellationError, "\(mode): \(String(describing: error))")
            XCTAssertLessThan(elapsed, 0.5, "\(mode)")
            let rows = try await queue.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(rows, 0, "rolled back, and the connection is usable (\(mode))")

            let (elapsedPerform, errorPerform) = try await cancelWhileRunning { started in
                try await queue.perform(Self.longBlock(started))
            }
            report("queue.perform (\(mode))", elapsedPerform)
            XCTAssertTrue(errorPerform is CancellationError, "\(mode): \(String(describing: errorPerform))")
            XCTAssertLessThan(elapsedPerform, 0.5)
            queue.inDatabase { db in XCTAssertEqual(db.int(forQuery: "SELECT 42"), 42) }
        }
    }

    func testCancellingAPoolTransactionInterruptsAndRollsBack() async throws {
        for mode in StorageMode.allCases {
            let path = directory.path("\(mode)-pool.db")
            let pool: FMDatabasePool
            if let provider = mode.keyProvider {
                pool = try FMDatabasePool(path: path, keyProvider: provider)
            } else {
                pool = FMDatabasePool(path: path)
            }
            pool.maximumNumberOfDatabasesToCreate = 1
            try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
            let (elapsed, error) = try await cancelWhileRunning { started in
                try await pool.performTransaction(.immediate, Self.longBlock(started))
            }
            report("pool.performTransaction (\(mode))", elapsed)
            XCTAssertTrue(error is CancellationError, "\(mode): \(String(describing: error))")
            XCTAssertLessThan(elapsed, 0.5, "\(mode)")
            XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
            let rows = try await pool.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(rows, 0, "rolled back, and the connection is usable (\(mode))")

            let (elapsedPerform, errorPerform) = try await cancelWhileRunning { started in
                try await pool.perform(Self.longBlock(started))
            }
            report("pool.perform (\(mode))", elapsedPerform)
            XCTAssertTrue(errorPerform is CancellationError, "\(mode): \(String(describing: errorPerform))")
            XCTAssertLessThan(elapsedPerform, 0.5)
            pool.inDatabase { db in XCTAssertEqual(db.int(forQuery: "SELECT 42"), 42) }
            XCTAssertEqual(pool.countOfOpenDatabases, 1, "the same connection, still in the pool")
        }
    }

    func testACallCancelledBeforeItStartsDoesNotRunItsBlock() async throws {
        let queue = try FMDatabaseQueue(
            path: directory.path("early.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider))
        let pool = try FMDatabasePool(
            path: directory.path("early.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider))
        let ran = Locked(0)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            _ = try? await queue.perform { _ in ran.withLock { $0 += 1 } }
            _ = try? await queue.performTransaction { _ in ran.withLock { $0 += 1 } }
            _ = try? await pool.perform { _ in ran.withLock { $0 += 1 } }
            do {
                try await pool.performTransaction { _ in ran.withLock { $0 += 1 } }
                return false
            } catch {
                return error is CancellationError
            }
        }
        let threwCancellation = await task.value
        XCTAssertTrue(threwCancellation)
        XCTAssertEqual(ran.withLock { $0 }, 0)
    }
}
