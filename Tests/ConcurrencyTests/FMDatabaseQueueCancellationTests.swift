@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// `perform` and `performTransaction` of queues and pools honour Task cancellation: the running
/// statement is interrupted, the transaction rolled back, the call throws CancellationError, and the
/// connection stays usable. (Named for the queue and pool test filters.)
final class FMDatabaseQueueCancellationTests: FMDBCipherTestCase {
    /// Tens of seconds of work unless interrupted. It calls `running()` once, a few rows in: the statement is
    /// stepping then, so an interrupt from that moment on reaches it. (One sent before its first step would
    /// be dropped: SQLite clears the interrupt flag when a statement starts with none running.)
    static let longQuery =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000 AND (x <> 1000 OR "
        + "running())) SELECT count(*) FROM c"

    /// What a long block saw: whether its long query is stepping, and whether SQLite interrupted it.
    struct Probe: Sendable {
        let running = Locked(false)
        let interrupted = Locked(false)
    }

    /// Inserts a row, then runs the long query; `probe.running` turns true from inside the query (its
    /// `running()` function), and `probe.interrupted` when the query ends with `SQLITE_INTERRUPT` (it would
    /// otherwise run for tens of seconds and return its count: the call's `CancellationError` alone cannot
    /// tell the two apart).
    static func longBlock(_ probe: Probe) -> @Sendable (FMDatabase) throws -> Int32 {
        { db in
            try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
            db.makeFunctionNamed("running", arguments: 0) { [weak db] context, _, _ in
                probe.running.withLock { $0 = true }
                db?.resultInt(1, context: context)
            }
            do {
                let rs = try db.executeQuery(longQuery, values: nil)
                _ = try rs.nextWithError()
                return rs.int(forColumnIndex: 0)
            } catch let error as FMDatabaseError where error.resultCode == SQLITE_INTERRUPT {
                probe.interrupted.withLock { $0 = true }
                throw error
            }
        }
    }

    /// Starts `call` in a task, cancels it once its long query is stepping, and returns how long the call
    /// took to return after `cancel()` (printed; asserted only against a hang, below), the error it ended
    /// with, and whether its query was interrupted. The wait for the query is bounded (a call that
    /// never runs it is cancelled after a minute, and fails the test as not interrupted).
    func cancelWhileRunning(_ call: @escaping @Sendable (Probe) async throws -> Int32) async throws -> (
        TimeInterval, Error?, interrupted: Bool
    ) {
        let probe = Probe()
        let task = Task { try await call(probe) }
        let patience = Date().addingTimeInterval(60)
        while !probe.running.withLock({ $0 }), Date() < patience { try await Task.sleep(nanoseconds: 1_000_000) }
        let start = Date()
        task.cancel()
        let result = await task.result
        let elapsed = Date().timeIntervalSince(start)
        // A hang guard, not a speed assertion: the call returns within milliseconds when the interrupt
        // reaches the statement, and the query runs for tens of seconds when it does not. Five seconds
        // (thousands of times the usual figure) only fails a call that stopped waiting on the interrupt.
        XCTAssertLessThan(elapsed, 5.0, "cancel-to-return: the call hung after cancel()")
        let interrupted = probe.interrupted.withLock { $0 }
        if case .failure(let error) = result { return (elapsed, error, interrupted) }
        return (elapsed, nil, interrupted)
    }

    func report(_ what: String, _ elapsed: TimeInterval) {
        print(String(format: "cancel-to-return %@: %.1f ms", what, elapsed * 1000))
    }

    /// A cancellation that comes between two statements of a block stops the next one too: the block is
    /// held between its statements until the task is cancelled, then starts a query of a few seconds, which
    /// must end with `SQLITE_INTERRUPT` instead of its count (`sqlite3_interrupt` alone is dropped when no
    /// statement runs).
    func testACancellationBetweenStatementsStopsTheNextStatement() async throws {
        let query =
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000000) SELECT count(*) FROM c"
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("between-queue.db")))
        let pool = FMDatabasePool(path: directory.path("between-pool.db"))
        defer {
            queue.close()
            pool.releaseAllDatabases()
        }
        let calls: [(String, @Sendable (@escaping @Sendable (FMDatabase) throws -> Int32) async throws -> Int32)] = [
            ("queue.perform", { try await queue.perform($0) }),
            ("queue.performTransaction", { try await queue.performTransaction(.immediate, $0) }),
            ("pool.perform", { try await pool.perform($0) }),
            ("pool.performTransaction", { try await pool.performTransaction(.immediate, $0) }),
        ]
        for (name, call) in calls {
            let between = Locked(false)
            let cancelled = Locked(false)
            let interrupted = Locked(false)
            let task = Task {
                try await call { db in
                    _ = db.int(forQuery: "SELECT 1")
                    between.withLock { $0 = true }
                    let patience = Date().addingTimeInterval(60)
                    while !cancelled.withLock({ $0 }), Date() < patience { Thread.sleep(forTimeInterval: 0.001) }
                    do {
                        let rs = try db.executeQuery(query, values: nil)
                        _ = try rs.nextWithError()
                        return rs.int(forColumnIndex: 0)
                    } catch let error as FMDatabaseError where error.resultCode == SQLITE_INTERRUPT {
                        interrupted.withLock { $0 = true }
                        throw error
                    }
                }
            }
            let patience = Date().addingTimeInterval(60)
            while !between.withLock({ $0 }), Date() < patience { try await Task.sleep(nanoseconds: 1_000_000) }
            task.cancel()
            cancelled.withLock { $0 = true }
            let result = await task.result
            if case .success = result { XCTFail("\(name): a cancelled call must not succeed") }
            XCTAssertTrue(interrupted.withLock { $0 }, "\(name): the statement started after the cancellation stopped")
        }
        // The check is gone once the call returned: the same connections run long statements to their end.
        let count = try await queue.perform { db in
            db.int(
                forQuery:
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000) SELECT count(*) "
                    + "FROM c"
            )
        }
        XCTAssertEqual(count, 100_000)
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
                    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) "
                        + "FROM c",
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
            let (elapsed, error, interrupted) = try await cancelWhileRunning { probe in
                try await queue.performTransaction(.immediate, Self.longBlock(probe))
            }
            report("queue.performTransaction (\(mode))", elapsed)
            XCTAssertTrue(error is CancellationError, "\(mode): \(String(describing: error))")
            XCTAssertTrue(interrupted, "\(mode): the running statement was interrupted, not run to its end")
            let rows = try await queue.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(rows, 0, "rolled back, and the connection is usable (\(mode))")

            let (elapsedPerform, errorPerform, interruptedPerform) = try await cancelWhileRunning { probe in
                try await queue.perform(Self.longBlock(probe))
            }
            report("queue.perform (\(mode))", elapsedPerform)
            XCTAssertTrue(errorPerform is CancellationError, "\(mode): \(String(describing: errorPerform))")
            XCTAssertTrue(interruptedPerform, "\(mode): the running statement was interrupted")
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
            let (elapsed, error, interrupted) = try await cancelWhileRunning { probe in
                try await pool.performTransaction(.immediate, Self.longBlock(probe))
            }
            report("pool.performTransaction (\(mode))", elapsed)
            XCTAssertTrue(error is CancellationError, "\(mode): \(String(describing: error))")
            XCTAssertTrue(interrupted, "\(mode): the running statement was interrupted, not run to its end")
            XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
            let rows = try await pool.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(rows, 0, "rolled back, and the connection is usable (\(mode))")

            let (elapsedPerform, errorPerform, interruptedPerform) = try await cancelWhileRunning { probe in
                try await pool.perform(Self.longBlock(probe))
            }
            report("pool.perform (\(mode))", elapsedPerform)
            XCTAssertTrue(errorPerform is CancellationError, "\(mode): \(String(describing: errorPerform))")
            XCTAssertTrue(interruptedPerform, "\(mode): the running statement was interrupted")
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

    /// A pool call cancelled before it got a connection opens none: it throws before the pool opens (and,
    /// keyed, derives a key for) a connection it would not use.
    func testACallCancelledBeforeItStartsOpensNoConnection() async throws {
        let pool = FMDatabasePool(path: directory.path("lazy.db"))
        XCTAssertEqual(pool.countOfOpenDatabases, 0)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var cancelled = 0
            do { _ = try await pool.perform { _ in 1 } } catch is CancellationError { cancelled += 1 }
            do { _ = try await pool.performTransaction { _ in 1 } } catch is CancellationError { cancelled += 1 }
            return cancelled
        }
        let cancelled = try await task.value
        XCTAssertEqual(cancelled, 2)
        XCTAssertEqual(pool.countOfOpenDatabases, 0, "a cancelled call opened a connection it did not use")
        pool.releaseAllDatabases()
    }

    /// A `perform` or `performTransaction` waiting for a connection of a pool at its limit stops waiting
    /// when its task is cancelled: it throws `CancellationError` while the connection is still held, and
    /// its block never runs.
    func testACallWaitingForAPoolConnectionStopsWaitingWhenCancelled() async throws {
        let pool = FMDatabasePool(path: directory.path("waiting.db"))
        pool.maximumNumberOfDatabasesToCreate = 1
        try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
        let held = try await HeldBlock.start { hold in pool.inDatabase { _ in hold() } }

        let ran = Locked(0)
        let calls: [(String, @Sendable () async throws -> Void)] = [
            ("perform", { try await pool.perform { _ in ran.withLock { $0 += 1 } } }),
            ("performTransaction", { try await pool.performTransaction(.immediate) { _ in ran.withLock { $0 += 1 } } }),
        ]
        for (name, call) in calls {
            let task = Task { try await call() }
            // Cancelled once it waits in the pool for the held connection.
            while pool.connections.statistics.waiters == 0, !held.isReleased {
                try await Task.sleep(nanoseconds: 1_000_000)
            }
            task.cancel()
            let result = await task.result
            XCTAssertFalse(held.isReleased, "\(name): the call returned while the connection was held")
            guard case .failure(let error) = result else {
                XCTFail("\(name): a cancelled call must not succeed")
                continue
            }
            XCTAssertTrue(error is CancellationError, "\(name): \(error)")
        }
        try await held.release()
        XCTAssertEqual(ran.withLock { $0 }, 0, "no cancelled block ran")
        XCTAssertNil(pool.lastError, "a cancellation is not the pool's error")
        let count = try await pool.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(count, 0, "the pool serves on")
        XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
    }

    /// A pool `performTransaction` waiting for its turn behind another thread's transaction on the file stops
    /// waiting when its task is cancelled: it throws `CancellationError` while the other transaction still
    /// runs, its block never runs, and the turns after it are served.
    func testAPoolTransactionWaitingForItsTurnStopsWaitingWhenCancelled() async throws {
        let path = directory.path("turn.db")
        let pool = FMDatabasePool(path: path)
        try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
        let gate = WriteGate.shared(forPath: path)
        let held = try await HeldBlock.start { hold in
            try? pool.inTransaction(.immediate) { db in
                try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
                hold()
            }
        }

        let ran = Locked(0)
        let task = Task {
            try await pool.performTransaction(.immediate) { db in
                ran.withLock { $0 += 1 }
                try db.executeUpdate("INSERT INTO t VALUES (2)", values: nil)
            }
        }
        while gate.waitingCount == 0, !held.isReleased { try await Task.sleep(nanoseconds: 1_000_000) }
        let start = Date()
        task.cancel()
        let result = await task.result
        XCTAssertFalse(held.isReleased, "the call returned only after the other transaction ended")
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "hang guard")
        if case .failure(let error) = result {
            XCTAssertTrue(error is CancellationError, "\(error)")
        } else {
            XCTFail("a cancelled call must not succeed")
        }
        XCTAssertEqual(gate.waitingCount, 0, "the cancelled call left the queue")

        try await held.release()
        try await pool.performTransaction(.immediate) { db in
            try db.executeUpdate("INSERT INTO t VALUES (3)", values: nil)
        }
        XCTAssertEqual(ran.withLock { $0 }, 0, "the cancelled block never ran")
        let values = try await pool.perform { db in db.string(forQuery: "SELECT group_concat(a) FROM t") }
        XCTAssertEqual(values, "1,3", "the holder's and the next turn's rows, not the cancelled one's")
        XCTAssertNil(pool.lastError, "a cancellation is not the pool's error")
    }

    /// A queue `perform` or `performTransaction` waiting for its turn behind another thread's block stops
    /// waiting when its task is cancelled: it throws `CancellationError` while that block still runs, and its
    /// own block never runs, not even when the turn comes.
    func testAQueueCallWaitingForItsTurnStopsWaitingWhenCancelled() async throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: directory.path("queue-turn.db")))
        try queue.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
        let held = try await HeldBlock.start { hold in queue.inDatabase { _ in hold() } }

        let ran = Locked(0)
        let calls: [(String, @Sendable () async throws -> Void)] = [
            ("perform", { try await queue.perform { _ in ran.withLock { $0 += 1 } } }),
            (
                "performTransaction",
                { try await queue.performTransaction(.immediate) { _ in ran.withLock { $0 += 1 } } }
            ),
        ]
        for (name, call) in calls {
            let task = Task { try await call() }
            // Queued behind the held block by now; on a slow machine the cancellation may land before the
            // call was queued, which must end the same way.
            try await Task.sleep(nanoseconds: 50_000_000)
            task.cancel()
            let result = await task.result
            XCTAssertFalse(held.isReleased, "\(name): the call returned only after the held block ended")
            guard case .failure(let error) = result else {
                XCTFail("\(name): a cancelled call must not succeed")
                continue
            }
            XCTAssertTrue(error is CancellationError, "\(name): \(error)")
        }
        try await held.release()
        let count = try await queue.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(count, 0, "the queue serves on, after the cancelled calls' turns")
        XCTAssertEqual(ran.withLock { $0 }, 0, "no cancelled block ran when its turn came")
    }
}

/// A block another thread holds open (a pool connection, a turn at the write gate, the queue) until the
/// test releases it; 10 s at most, so a regression fails instead of hanging.
final class HeldBlock: Sendable {
    private let holding = Locked(false)
    private let releasing = Locked(false)
    private let released = Locked(false)

    /// Whether the hold has ended.
    var isReleased: Bool { released.withLock { $0 } }

    /// Starts a thread that runs `enter`, which calls `hold` inside the block to hold, and returns once the
    /// hold has begun.
    static func start(_ enter: @escaping @Sendable (_ hold: () -> Void) -> Void) async throws -> HeldBlock {
        let held = HeldBlock()
        Thread { enter { held.hold() } }.start()
        while !held.holding.withLock({ $0 }) { try await Task.sleep(nanoseconds: 1_000_000) }
        return held
    }

    private func hold() {
        holding.withLock { $0 = true }
        let patience = Date().addingTimeInterval(10)
        while !releasing.withLock({ $0 }), Date() < patience { Thread.sleep(forTimeInterval: 0.001) }
        released.withLock { $0 = true }
    }

    /// Ends the hold, and returns once the holding block has returned.
    func release() async throws {
        releasing.withLock { $0 = true }
        while !isReleased { try await Task.sleep(nanoseconds: 1_000_000) }
    }
}
