@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A task's cancellation reaches its own call and no other: not the block of a call cancelled as it got its
/// connection (the block does not run), and not the statements run on the connection after the call ended.
final class CancellationScopeTests: FMDBCipherTestCase {
    /// More than a thousand virtual-machine steps: SQLite's progress handler is asked while it runs.
    static let countTo100000 =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) SELECT count(*) FROM c"

    /// Cancels the call's task while the pool hands the call its connection (`shouldAddDatabaseToPool` runs
    /// after the pool's own check of the cancellation, before the block).
    final class CancelAtHandOver: FMDatabasePoolDelegate {
        let task = Locked<Task<Void, Error>?>(nil)
        let armed = Locked(false)

        func databasePool(_ pool: FMDatabasePool, shouldAddDatabaseToPool database: FMDatabase) -> Bool {
            guard armed.withLock({ $0 }) else { return true }
            let patience = Date().addingTimeInterval(30)
            while task.withLock({ $0 == nil }), Date() < patience { usleep(1_000) }
            task.withLock { $0?.cancel() }
            return true
        }
    }

    func testAPoolCallCancelledAsItGetsItsConnectionDoesNotRunItsBlock() async throws {
        let pool = try FMDatabasePool(
            path: directory.path("hand-over.db"), configuration: FMDatabaseConfiguration(logsErrors: false))
        pool.inDatabase { db in XCTAssertTrue(db.executeUpdate("create table t (v integer)")) }
        let delegate = CancelAtHandOver()
        pool.delegate = delegate
        let ran = Locked(false)
        delegate.armed.withLock { $0 = true }
        let task = Task {
            try await pool.perform { db in
                ran.withLock { $0 = true }
                try db.executeUpdate("insert into t values (1)", values: nil)
            }
        }
        delegate.task.withLock { $0 = task }
        let result = await task.result
        delegate.armed.withLock { $0 = false }
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertFalse(ran.withLock { $0 }, "the block did not run")
        pool.inDatabase { db in XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 0, "nothing written") }
        _ = delegate
    }

    /// A queue call whose task was cancelled before the call was made never takes its turn: a queue whose
    /// database was closed does not open it again (no key derivation, no `prepareDatabase`) only to throw.
    func testAQueueCallCancelledBeforeItStartsOpensNoConnection() async throws {
        let opened = Locked(0)
        let queue = try FMDatabaseQueue(
            path: directory.path("closed.db"),
            configuration: FMDatabaseConfiguration(prepareDatabase: { _ in opened.withLock { $0 += 1 } }))
        XCTAssertEqual(opened.withLock { $0 }, 1, "the connection the init opened")
        queue.close()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var cancelled = 0
            do { try await queue.perform { _ in } } catch is CancellationError { cancelled += 1 }
            do { try await queue.performTransaction(.immediate) { _ in } } catch is CancellationError { cancelled += 1 }
            return cancelled
        }
        let cancelled = try await task.value
        XCTAssertEqual(cancelled, 2, "both calls threw CancellationError")
        queue.close()  // Runs on the queue: after the cancelled calls' turns.
        XCTAssertEqual(opened.withLock { $0 }, 1, "no connection was opened for a cancelled call")
    }

    /// A call cancelled while its block ran: its long statement is stopped, and the next use of the
    /// connection (a synchronous block, which installs no cancellation of its own) runs to the end.
    func testACancelledCallLeavesNoCancellationOnItsConnection() async throws {
        let queue = try FMDatabaseQueue(
            path: directory.path("after.db"), configuration: FMDatabaseConfiguration(logsErrors: false))
        let started = Locked(false)
        let cancelSent = Locked(false)
        let sql = Self.countTo100000
        let task = Task {
            try await queue.perform { db in
                started.withLock { $0 = true }
                let patience = Date().addingTimeInterval(30)
                while !cancelSent.withLock({ $0 }), Date() < patience { usleep(1_000) }
                return db.int(forQuery: sql)
            }
        }
        let patience = Date().addingTimeInterval(30)
        while !started.withLock({ $0 }), Date() < patience { try await Task.sleep(nanoseconds: 1_000_000) }
        task.cancel()
        cancelSent.withLock { $0 = true }
        let result = await task.result
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: sql) }, 100_000)
    }
}
