@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// The pool's own transactions queue first-come, first-served per file (Core/WriteGate.swift),
/// so its writers cannot starve each other in SQLite's busy handler.
final class PoolWriteGateTests: FMDBCipherTestCase {
    static let rawKey = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 5) })

    /// Sets a short busy timeout on every connection the pool opens.
    final class ShortBusyTimeout: FMDatabasePoolDelegate, @unchecked Sendable {
        // @unchecked Sendable: immutable.
        let seconds: TimeInterval
        init(_ seconds: TimeInterval) { self.seconds = seconds }
        func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {
            database.maxBusyRetryTimeInterval = seconds
        }
    }

    // MARK: - The gate

    func testTurnsAreServedInArrivalOrder() throws {
        let gate = WriteGate()
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        let order = Locked<[Int]>([])
        done.enter()
        Thread.detachNewThread {
            _ = try? gate.withTurn {
                holding.signal()
                release.wait()
            }
            done.leave()
        }
        holding.wait()
        let count = 8
        for index in 0..<count {
            done.enter()
            Thread.detachNewThread {
                _ = try? gate.withTurn { order.withLock { $0.append(index) } }
                done.leave()
            }
            // The next thread starts only once this one has taken its ticket and waits.
            let deadline = Date().addingTimeInterval(60)
            while gate.waitingCount < index + 1, Date() < deadline { usleep(1_000) }
            XCTAssertEqual(gate.waitingCount, index + 1)
        }
        release.signal()
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(order.withLock { $0 }, Array(0..<count), "first come, first served")
    }

    /// Turns that time out leave the queue; the others still run one at a time (the counter below is
    /// only protected by the gate: ThreadSanitizer checks that too).
    func testTimedOutTurnsLeaveTheQueueAndTheOthersStillRunOneAtATime() throws {
        final class Counter: @unchecked Sendable {
            // @unchecked Sendable: only touched inside the gate's turns, which never overlap.
            var value = 0
            var inside = 0
            var overlaps = 0
        }
        let gate = WriteGate()
        let counter = Counter()
        let outcomes = Locked<(ran: Int, timedOut: Int, other: Int)>((0, 0, 0))
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for iteration in 0..<200 {
                do {
                    try gate.withTurn(timeout: worker % 2 == 0 ? 0.0005 : nil) {
                        counter.inside += 1
                        if counter.inside > 1 { counter.overlaps += 1 }
                        counter.value += 1
                        if iteration % 10 == 0 { usleep(200) }
                        counter.inside -= 1
                    }
                    outcomes.withLock { $0.ran += 1 }
                } catch let error as FMDatabaseError where error.resultCode == SQLITE_BUSY {
                    outcomes.withLock { $0.timedOut += 1 }
                } catch {
                    outcomes.withLock { $0.other += 1 }
                }
            }
        }
        let result = outcomes.withLock { $0 }
        XCTAssertEqual(result.ran + result.timedOut, 1_600)
        XCTAssertEqual(result.other, 0)
        XCTAssertEqual(counter.overlaps, 0, "turns never overlap")
        XCTAssertEqual(counter.value, result.ran)
        XCTAssertEqual(gate.waitingCount, 0, "no waiter is left behind")
        // The gate still works.
        XCTAssertEqual(try gate.withTurn(timeout: 0.1) { 42 }, 42)
    }

    func testPoolsOnTheSameFileShareOneGate() throws {
        let path = directory.path("shared.db")
        let link = directory.path("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: directory.url.path)
        let gate = WriteGate.shared(forPath: path)
        XCTAssertTrue(gate === WriteGate.shared(forPath: path))
        XCTAssertTrue(
            gate === WriteGate.shared(forPath: link + "/shared.db"), "a link to the directory names the same file")
        XCTAssertTrue(gate === WriteGate.shared(forPath: directory.url.path + "/./shared.db"))
        XCTAssertFalse(gate === WriteGate.shared(forPath: directory.path("other.db")))
        XCTAssertFalse(
            WriteGate.shared(forPath: nil) === WriteGate.shared(forPath: nil), "in-memory databases share nothing")
        XCTAssertFalse(WriteGate.shared(forPath: ":memory:") === WriteGate.shared(forPath: ":memory:"))
    }

    func testTwoPoolsOnOneFileQueueBehindEachOther() throws {
        let path = directory.path("two.db")
        let first = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Self.rawKey))
        let second = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Self.rawKey))
        try first.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
        let inFirst = DispatchSemaphore(value: 0)
        let finishFirst = DispatchSemaphore(value: 0)
        let secondDone = DispatchSemaphore(value: 0)
        let events = Locked<[String]>([])
        Thread.detachNewThread {
            _ = try? first.inTransaction(.immediate) { db in
                inFirst.signal()
                finishFirst.wait()
                try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
                events.withLock { $0.append("first") }
            }
        }
        inFirst.wait()
        Thread.detachNewThread {
            do {
                try second.inTransaction(.immediate) { db in
                    try db.executeUpdate("INSERT INTO t VALUES (2)", values: nil)
                    events.withLock { $0.append("second") }
                }
            } catch {
                events.withLock { $0.append("second failed: \(error)") }
            }
            secondDone.signal()
        }
        // The second pool's transaction waits at the gate (not in SQLite's busy handler, where it would
        // time out after the default 2 s): hold the first one for longer than that.
        let deadline = Date().addingTimeInterval(60)
        while WriteGate.shared(forPath: path).waitingCount < 1, Date() < deadline { usleep(1_000) }
        XCTAssertEqual(WriteGate.shared(forPath: path).waitingCount, 1)
        Thread.sleep(forTimeInterval: 2.5)
        finishFirst.signal()
        XCTAssertEqual(secondDone.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(events.withLock { $0 }, ["first", "second"])
        XCTAssertEqual(first.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 2)
    }

    func testANestedPoolTransactionOnTheSameThreadFailsInsteadOfDeadlocking() throws {
        let pool = try FMDatabasePool(path: directory.path("nested.db"), keyProvider: RawKeyProvider(key: Self.rawKey))
        try pool.inTransaction(.immediate) { db in
            try db.executeUpdate("CREATE TABLE t (a)", values: nil)
            XCTAssertThrowsError(try pool.inTransaction(.immediate) { _ in XCTFail("the nested block must not run") }) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
            }
            var ran = false
            pool.inDeferredTransaction { _, _ in ran = true }
            XCTAssertFalse(ran)
            XCTAssertEqual((pool.lastError as? FMDatabaseError)?.resultCode, SQLITE_MISUSE)
            // Reads in the enclosing transaction's thread still work (they do not queue).
            XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "SELECT 1") }, 1)
        }
    }

    /// A transaction that cannot start (another process holds the write lock past the busy timeout) is
    /// visible: the throwing form throws SQLITE_BUSY, the FMDB form skips the block and sets `lastError`.
    func testATransactionThatCannotStartIsVisibleToTheCaller() throws {
        let path = directory.path("busy.db")
        let delegate = ShortBusyTimeout(0.2)
        let pool = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Self.rawKey))
        pool.delegate = delegate
        pool.releaseAllDatabases()  // Connections are reopened, and the delegate sets their timeout.
        try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
        // Another connection outside the pool (as another process would) holds the write lock.
        let other = FMDatabase(path: path)
        XCTAssertTrue(other.open())
        try other.setKey(using: RawKeyProvider(key: Self.rawKey))
        XCTAssertTrue(other.beginImmediateTransaction())
        defer { other.close() }

        XCTAssertThrowsError(try pool.inTransaction(.immediate) { _ in XCTFail("must not run") }) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_BUSY))
        }
        var ran = false
        pool.inTransaction { _, _ in ran = true }
        XCTAssertFalse(ran, "the FMDB form skips the block")
        XCTAssertEqual((pool.lastError as? FMDatabaseError)?.resultCode, SQLITE_BUSY, "and says why in lastError")
        XCTAssertTrue(other.rollback())
        pool.inTransaction { _, _ in ran = true }
        XCTAssertTrue(ran)
    }

    /// `transactionQueueTimeout` is the explicit limit on the wait for a turn: when it runs out the
    /// transaction does not start, visibly.
    func testTransactionQueueTimeoutIsExplicitAndVisible() throws {
        let path = directory.path("timeout.db")
        let pool = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Self.rawKey))
        try pool.inDatabase { db in try db.executeUpdate("CREATE TABLE t (a)", values: nil) }
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? pool.inTransaction(.immediate) { _ in
                holding.signal()
                release.wait()
            }
            done.signal()
        }
        holding.wait()
        XCTAssertNil(pool.transactionQueueTimeout, "waits as long as it takes by default")
        pool.transactionQueueTimeout = 0.3
        let start = Date()
        XCTAssertThrowsError(try pool.inTransaction(.immediate) { _ in XCTFail("must not run") }) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_BUSY))
        }
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.3)
        var ran = false
        pool.inImmediateTransaction { _, _ in ran = true }
        XCTAssertFalse(ran)
        XCTAssertEqual((pool.lastError as? FMDatabaseError)?.resultCode, SQLITE_BUSY)
        XCTAssertEqual(WriteGate.shared(forPath: path).waitingCount, 0)
        release.signal()
        done.wait()
        try pool.inTransaction(.immediate) { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) }
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 1)
    }

    // MARK: - The writer connection

    /// Transactions and savepoints (the blocks that take turns at the file's write gate) keep to the connection
    /// the last one ran on, whose page cache no other connection's write invalidated; other blocks take
    /// another idle connection while there is one.
    func testWriteTransactionsKeepToOneConnectionAndReadsTakeAnother() throws {
        let path = directory.path("writer.db")
        let pool = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Self.rawKey))
        pool.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            XCTAssertTrue(db.executeUpdate("create table t (v integer)"))
        }
        // Three idle connections.
        pool.inDatabase { _ in pool.inDatabase { _ in pool.inDatabase { _ in } } }
        XCTAssertEqual(pool.countOfOpenDatabases, 3)

        var writers = Set<ObjectIdentifier>()
        var readers = [ObjectIdentifier]()
        for round in 0..<6 {
            try pool.inTransaction(.immediate) { db in
                writers.insert(ObjectIdentifier(db))
                try db.executeUpdate("insert into t values (?)", values: [round])
            }
            pool.inDatabase { db in
                readers.append(ObjectIdentifier(db))
                XCTAssertEqual(db.int(forQuery: "select count(*) from t"), Int32(round + 1))
            }
            if round == 3 {
                try pool.inTransaction(.deferred) { db in
                    writers.insert(ObjectIdentifier(db))
                    try db.executeUpdate("delete from t where 0", values: nil)
                }
                XCTAssertNil(pool.inSavePoint { db, _ in writers.insert(ObjectIdentifier(db)) })
            }
        }
        XCTAssertEqual(writers.count, 1, "every transaction and savepoint ran on one connection")
        XCTAssertTrue(readers.allSatisfy { !writers.contains($0) }, "reads took another idle connection")
        XCTAssertEqual(pool.countOfOpenDatabases, 3, "no connection opened for it")

        // With the writer the only idle connection, a read takes it (nothing waits for it).
        pool.releaseAllDatabases()
        pool.inTransaction { db, _ in XCTAssertTrue(db.executeUpdate("insert into t values (9)")) }  // Exclusive.
        pool.inDatabase { db in XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 7) }
        XCTAssertEqual(pool.countOfOpenDatabases, 1)
    }

    // MARK: - Load

    /// As a server would use the pool: 8 workers (`concurrentPerform`) over a keyed WAL pool, each doing
    /// 3 point reads per write transaction of 10 upserts (half through the throwing form, half through
    /// the FMDB form), for `FMDB_POOL_LOAD_SECONDS` (default 3) seconds and until each worker committed two
    /// transactions (on a loaded machine a worker may start after the others' seconds ran out: the progress
    /// checked below is counted, never expected of a time), with the default 2-second busy timeout. Before
    /// the write gate, runs of 20 s skipped one to four transactions.
    func testKeyedWALPoolUnderLoadSkipsNoTransactionAndLosesNoWrite() throws {
        let seconds = ProcessInfo.processInfo.environment["FMDB_POOL_LOAD_SECONDS"].flatMap(Double.init) ?? 3
        let path = directory.path("load.db")
        let pool = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Self.rawKey))
        try pool.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = WAL"), "wal")
            try db.executeUpdate(
                "CREATE TABLE kv (k INTEGER PRIMARY KEY, v INTEGER NOT NULL, w INTEGER NOT NULL)", values: nil)
            try db.executeUpdate(
                "CREATE TABLE log (w INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (w, seq))", values: nil)
        }

        struct WorkerResult {
            var worker = 0
            var transactions = 0
            var reads = 0
            var skipped = 0
            var errors: [String] = []
            var acknowledged: [Int] = []
            var lastValue: [Int: Int] = [:]
        }
        let results = Locked<[WorkerResult]>([])
        let keysPerWorker = 200
        let start = Date()
        let deadline = start.addingTimeInterval(seconds)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var result = WorkerResult(worker: worker)
            var seq = 0
            // A worker whose every transaction fails still stops, after 1,000 tries.
            while Date() < deadline || (result.transactions < 2 && seq < 1_000) {
                for read in 0..<3 {
                    let key = worker * 1_000 + (seq * 7 + read) % keysPerWorker
                    do {
                        _ = try pool.inDatabase { db throws -> Int? in
                            let rs = try db.executeQuery("SELECT v FROM kv WHERE k = ?", values: [key])
                            defer { rs.close() }
                            return try rs.nextWithError() ? Int(rs.int(forColumnIndex: 0)) : nil
                        }
                        result.reads += 1
                    } catch {
                        result.errors.append("read: \(error)")
                    }
                }
                seq += 1
                let keys = (0..<10).map { worker * 1_000 + (seq * 10 + $0) % keysPerWorker }
                let upsert = "INSERT OR REPLACE INTO kv (k, v, w) VALUES (?, ?, ?)"
                var committed = false
                if seq % 2 == 0 {
                    do {
                        try pool.inTransaction(.immediate) { db in
                            for key in keys { try db.executeUpdate(upsert, values: [key, seq, worker]) }
                            try db.executeUpdate("INSERT INTO log (w, seq) VALUES (?, ?)", values: [worker, seq])
                        }
                        committed = true
                    } catch {
                        result.errors.append("transaction: \(error)")
                    }
                } else {
                    var ran = false
                    var failed = false
                    pool.inTransaction { db, _ in
                        ran = true
                        for key in keys where !db.executeUpdate(upsert, key, seq, worker) { failed = true }
                        if !db.executeUpdate("INSERT INTO log (w, seq) VALUES (?, ?)", worker, seq) { failed = true }
                    }
                    if !ran {
                        result.skipped += 1
                    } else if failed {
                        result.errors.append("FMDB-style transaction: a statement failed")
                    } else {
                        committed = true
                    }
                }
                if committed {
                    result.transactions += 1
                    result.acknowledged.append(seq)
                    for key in keys { result.lastValue[key] = seq }
                }
            }
            results.withLock { $0.append(result) }
        }
        let elapsed = Date().timeIntervalSince(start)
        let all = results.withLock { $0 }
        XCTAssertEqual(all.count, 8)
        let transactions = all.reduce(0) { $0 + $1.transactions }
        let reads = all.reduce(0) { $0 + $1.reads }
        let skipped = all.reduce(0) { $0 + $1.skipped }
        let errors = all.flatMap(\.errors)
        print(
            String(
                format:
                    "pool load: 8 workers, %.1f s: %d write transactions (%.0f/s), %d point reads (%.0f/s), %d "
                    + "skipped, %d errors",
                elapsed, transactions, Double(transactions) / elapsed, reads, Double(reads) / elapsed, skipped,
                errors.count))
        XCTAssertEqual(skipped, 0, "no transaction was skipped")
        XCTAssertEqual(errors, [], "no errors")
        XCTAssertGreaterThan(transactions, 8, "the workers made progress")

        // Every acknowledged write is present, with its last value.
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        defer { check.close() }
        try check.setKey(using: RawKeyProvider(key: Self.rawKey))
        var logged = Set<[Int]>()
        let logRows = try check.executeQuery("SELECT w, seq FROM log", values: nil)
        while try logRows.nextWithError() {
            logged.insert([Int(logRows.int(forColumnIndex: 0)), Int(logRows.int(forColumnIndex: 1))])
        }
        logRows.close()
        var values: [Int: Int] = [:]
        let kvRows = try check.executeQuery("SELECT k, v FROM kv", values: nil)
        while try kvRows.nextWithError() {
            values[Int(kvRows.int(forColumnIndex: 0))] = Int(kvRows.int(forColumnIndex: 1))
        }
        kvRows.close()
        var missing = 0
        for result in all {
            for seq in result.acknowledged where !logged.contains([result.worker, seq]) { missing += 1 }
            for (key, value) in result.lastValue where values[key] != value { missing += 1 }
        }
        XCTAssertEqual(missing, 0, "every acknowledged write is present")
        XCTAssertEqual(logged.count, transactions, "no unacknowledged transaction committed either")
        XCTAssertEqual(check.string(forQuery: "PRAGMA integrity_check"), "ok")
    }
}
