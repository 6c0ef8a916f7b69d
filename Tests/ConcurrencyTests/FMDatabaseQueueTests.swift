@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// FMDB's Tests/FMDatabaseQueueTests.m, each behaviour run on a plain and on an encrypted database.
final class FMDatabaseQueueTests: FMDBCipherTestCase {
    func makeQueue(_ mode: StorageMode, name: String = "queue.db") throws -> (FMDatabaseQueue, String) {
        let path = directory.path("\(mode)-\(name)")
        let queue = try mode.makeQueue(at: path)
        queue.inDatabase { db in
            db.executeUpdate("create table easy (a text)")
            db.executeUpdate("create table qfoo (foo text)")
            db.executeUpdate("insert into qfoo values ('hi')")
            db.executeUpdate("insert into qfoo values ('hello')")
            db.executeUpdate("insert into qfoo values ('not')")
        }
        return (queue, path)
    }

    func testQueueSelect() throws {
        for mode in StorageMode.allCases {
            let (queue, _) = try makeQueue(mode)
            var ran = false
            queue.inDatabase { adb in
                ran = true
                var count = 0
                let rsl = adb.executeQuery("select * from qfoo where foo like 'h%'")
                while rsl?.next() ?? false { count += 1 }
                XCTAssertEqual(count, 2, "\(mode)")
                count = 0
                let rs2 = adb.executeQuery("select * from qfoo where foo like ?", "h%")
                while rs2?.next() ?? false { count += 1 }
                XCTAssertEqual(count, 2, "\(mode)")
            }
            XCTAssertTrue(ran)
            XCTAssertEqual(queue.path, directory.path("\(mode)-queue.db"))
            XCTAssertEqual(queue.openFlags, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            XCTAssertNil(queue.vfsName)
        }
    }

    func testAllInitializers() throws {
        XCTAssertNotNil(FMDatabaseQueue(path: nil))
        XCTAssertNotNil(FMDatabaseQueue(url: nil))
        let memory = FMDatabaseQueue()
        XCTAssertEqual(memory.inDatabase { db in db.int(forQuery: "select 40 + 2") }, 42)
        let url = directory.url.appendingPathComponent("u.db")
        XCTAssertNotNil(FMDatabaseQueue(url: url))
        XCTAssertNotNil(FMDatabaseQueue(url: url, flags: SQLITE_OPEN_READONLY))
        XCTAssertNotNil(FMDatabaseQueue(path: url.path, flags: SQLITE_OPEN_READONLY))
        XCTAssertNotNil(FMDatabaseQueue(url: url, flags: SQLITE_OPEN_READWRITE, vfs: nil))
        XCTAssertNil(FMDatabaseQueue(path: directory.path("missing/dir.db")), "cannot open: nil")
        XCTAssertNil(
            FMDatabaseQueue(
                path: directory.path("x.db"), flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: "nosuchvfs"))
        let keyed = try FMDatabaseQueue(
            url: directory.url.appendingPathComponent("k.db"), keyProvider: PassphraseKeyProvider("k"))
        XCTAssertEqual(keyed.inDatabase { db in db.int(forQuery: "pragma temp_store") }, 2)
    }

    func testReadOnlyQueue() throws {
        for mode in StorageMode.allCases {
            let (queue, path) = try makeQueue(mode)
            queue.close()
            let queue2: FMDatabaseQueue
            if let provider = mode.keyProvider {
                queue2 = try FMDatabaseQueue(path: path, flags: SQLITE_OPEN_READONLY, keyProvider: provider)
            } else {
                queue2 = try XCTUnwrap(FMDatabaseQueue(path: path, flags: SQLITE_OPEN_READONLY))
            }
            for _ in 0..<2 {
                var ran = false
                queue2.inDatabase { db2 in
                    ran = true
                    let rs1 = db2.executeQuery("SELECT * FROM qfoo")
                    XCTAssertNotNil(rs1, "\(mode)")
                    rs1?.close()
                    XCTAssertFalse(db2.executeUpdate("insert into easy values (?)", 3), "read-only: \(mode)")
                    XCTAssertEqual(db2.lastErrorCode(), SQLITE_READONLY)
                }
                XCTAssertTrue(ran)
                // When we re-open the database, it is still read-only.
                queue2.close()
            }
        }
    }

    func testStressTest() throws {
        for mode in StorageMode.allCases {
            let (queue, _) = try makeQueue(mode)
            DispatchQueue.concurrentPerform(iterations: 16) { nby in
                if nby % 2 == 1 {
                    Thread.sleep(forTimeInterval: 0.01)
                    queue.inTransaction { adb, _ in
                        let rsl = adb.executeQuery("select * from qfoo where foo like 'h%'")
                        while rsl?.next() ?? false {}
                    }
                }
                if nby % 3 == 1 { Thread.sleep(forTimeInterval: 0.01) }
                queue.inTransaction { adb, _ in
                    XCTAssertTrue(adb.executeUpdate("insert into qfoo values ('1')"))
                    XCTAssertTrue(adb.executeUpdate("insert into qfoo values ('2')"))
                    XCTAssertTrue(adb.executeUpdate("insert into qfoo values ('3')"))
                }
            }
            queue.close()
            queue.inDatabase { adb in
                XCTAssertTrue(adb.executeUpdate("insert into qfoo values ('1')"))
                XCTAssertEqual(adb.int(forQuery: "select count(*) from qfoo"), 3 + 16 * 3 + 1, "\(mode)")
            }
        }
    }

    func testTransaction() throws {
        for mode in StorageMode.allCases {
            let (queue, _) = try makeQueue(mode)
            queue.inDatabase { adb in
                adb.executeUpdate("create table transtest (a integer)")
                XCTAssertTrue(adb.executeUpdate("insert into transtest values (1)"))
                XCTAssertTrue(adb.executeUpdate("insert into transtest values (2)"))
                XCTAssertEqual(adb.int(forQuery: "select count(*) from transtest"), 2)
            }
            queue.inTransaction { adb, rollback in
                XCTAssertTrue(adb.isInTransaction)
                XCTAssertTrue(adb.executeUpdate("insert into transtest values (3)"))
                rollback.pointee = true
            }
            for begin in [queue.inDeferredTransaction, queue.inImmediateTransaction, queue.inExclusiveTransaction] {
                begin { adb, rollback in
                    XCTAssertTrue(adb.executeUpdate("insert into transtest values (4)"))
                    rollback.pointee = true
                }
            }
            queue.inImmediateTransaction { adb, _ in
                XCTAssertTrue(adb.executeUpdate("insert into transtest values (5)"))
            }
            queue.inDatabase { adb in
                XCTAssertEqual(adb.int(forQuery: "select count(*) from transtest"), 3, "\(mode)")
                XCTAssertFalse(adb.hasOpenResultSets)
                XCTAssertFalse(adb.isInTransaction)
            }
        }
    }

    func testSavePointsAndNestedSavepointRollback() throws {
        for mode in StorageMode.allCases {
            let (queue, _) = try makeQueue(mode)
            let error = queue.inSavePoint { db, _ in
                db.executeUpdate("insert into easy values ('outer')")
                let inner = db.inSavePoint { rollback in
                    db.executeUpdate("insert into easy values ('inner')")
                    rollback.pointee = true
                }
                XCTAssertNil(inner)
            }
            XCTAssertNil(error)
            XCTAssertNil(
                queue.inSavePoint { db, rollback in
                    db.executeUpdate("insert into easy values ('rolled back')")
                    rollback.pointee = true
                })
            queue.inDatabase { db in
                XCTAssertEqual(db.string(forQuery: "select group_concat(a) from easy"), "outer", "\(mode)")
            }
        }
    }

    func testBlocksRunInCallOrder() throws {
        let queue = FMDatabaseQueue()
        queue.inDatabase { db in db.executeUpdate("create table log (n integer)") }
        let group = DispatchGroup()
        let start = DispatchSemaphore(value: 0)
        // Block the queue, then make calls in a known order, one thread each: the next thread starts only
        // once the one before it is blocked in its call (asleep on a futex, as /proc tells), waiting its turn.
        let holding = DispatchSemaphore(value: 0)
        group.enter()
        Thread.detachNewThread {
            queue.inDatabase { _ in
                holding.signal()
                start.wait()
            }
            group.leave()
        }
        XCTAssertEqual(holding.wait(timeout: .now() + 60), .success, "the first block runs")
        for n in 0..<5 {
            let calling = Locked<String?>(nil)
            group.enter()
            Thread.detachNewThread {
                calling.withLock {
                    $0 = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")
                }
                queue.inDatabase { db in db.executeUpdate("insert into log values (?)", n) }
                group.leave()
            }
            let patience = Date().addingTimeInterval(60)
            var waiting = false
            while !waiting, Date() < patience {
                if let task = calling.withLock({ $0 }),
                    let stat = try? String(contentsOfFile: "/proc/\(task)/stat", encoding: .utf8),
                    let name = stat.lastIndex(of: ")")
                {
                    // Where it sleeps, when the kernel tells (not in a nanosleep, say): a queue's wait is a futex.
                    let channel = (try? String(contentsOfFile: "/proc/\(task)/wchan", encoding: .utf8)) ?? ""
                    waiting = stat[name...].hasPrefix(") S") && (channel.contains("futex") || channel == "0")
                }
                if !waiting { usleep(1_000) }
            }
            XCTAssertTrue(waiting, "call \(n) waits for its turn")
        }
        start.signal()
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        queue.inDatabase { db in
            XCTAssertEqual(
                db.string(forQuery: "select group_concat(n) from (select n from log order by rowid)"), "0,1,2,3,4")
        }
    }

    func testWrongKeyThrowsFromTheInitializer() throws {
        let (queue, path) = try makeQueue(.encrypted)
        queue.close()
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("wrong"))) { error in
            XCTAssertEqual(nsError(error).code, 26)
        }
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: path, keyProvider: PBKDF2KeyProvider(passphrase: "wrong", unsafeIterations: 10))
        ) { error in
            XCTAssertEqual(nsError(error).code, 26)
        }
        let unkeyed = try XCTUnwrap(FMDatabaseQueue(path: path), "SQLite opens lazily: the plain queue opens")
        unkeyed.inDatabase { db in
            db.logsErrors = false
            XCTAssertNil(db.executeQuery("select count(*) from qfoo"))
            XCTAssertEqual(db.lastErrorCode(), SQLITE_NOTADB)
        }
    }

    func testEveryReopenIsKeyed() throws {
        let provider = PBKDF2KeyProvider(passphrase: "reopen", digest: .sha256, unsafeIterations: 500)
        let path = directory.path("reopen.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
        queue.inDatabase { db in db.executeUpdate("create table t (a)") }
        for i in 0..<5 {
            queue.close()
            queue.inDatabase { db in
                XCTAssertTrue(db.executeUpdate("insert into t values (?)", i))
                XCTAssertEqual(db.int(forQuery: "pragma temp_store"), 2)
            }
        }
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 5)
        XCTAssertEqual(provider.derivationCount, 1, "one derivation for every reopen")
    }

    func testWhenTheDatabaseCannotBeReopenedTheBlockIsNotCalled() throws {
        let (queue, path) = try makeQueue(.encrypted, name: "gone.db")
        queue.close()
        // Replace the file with one the key cannot open.
        try FileManager.default.removeItem(atPath: path)
        try Data(repeating: 0x5A, count: 4096).write(to: URL(fileURLWithPath: path))
        var called = false
        queue.inDatabase { _ in called = true }
        queue.inTransaction { _, _ in called = true }
        XCTAssertNotNil(queue.inSavePoint { _, _ in called = true })
        XCTAssertFalse(called)
        XCTAssertEqual((queue.lastError as NSError?)?.code, 26)
        XCTAssertThrowsError(
            try queue.inDatabase { _ -> Int in
                called = true; try Task.checkCancellation(); return 1
            }
        ) { error in
            XCTAssertEqual(nsError(error).code, 26)
        }
        XCTAssertNil(queue.inDatabase { _ in 1 })
        XCTAssertFalse(called)
    }

    func testSwiftNativeVariants() async throws {
        let (queue, _) = try makeQueue(.encrypted)
        let count: Int32 = try queue.inDatabase { db in
            let rs = try db.executeQuery("select count(*) from qfoo", values: nil)
            XCTAssertTrue(rs.next())
            return rs.int(forColumnIndex: 0)
        }
        XCTAssertEqual(count, 3)
        struct Boom: Error {}
        XCTAssertThrowsError(
            try queue.inTransaction(.immediate) { db in
                try db.executeUpdate("insert into qfoo values ('x')", values: nil)
                throw Boom()
            }
        ) { XCTAssertTrue($0 is Boom) }
        try queue.inTransaction(.deferred) { db in
            try db.executeUpdate("insert into qfoo values ('y')", values: nil)
        }
        let asyncCount = try await queue.perform { db in db.int(forQuery: "select count(*) from qfoo") }
        XCTAssertEqual(asyncCount, 4, "the throwing transaction rolled back, the other committed")
        let inserted = try await queue.performTransaction { db in
            try db.executeUpdate("insert into qfoo values ('z')", values: nil)
            return db.lastInsertRowId
        }
        XCTAssertGreaterThan(inserted, 0)
        async let a = queue.perform { db in db.int(forQuery: "select count(*) from qfoo") }
        async let b = queue.perform { db in db.int(forQuery: "select count(*) from qfoo where foo like 'h%'") }
        let (ca, cb) = try await (a, b)
        XCTAssertEqual(ca, 5)
        XCTAssertEqual(cb, 2)
    }

    func testInterruptFromAnotherThread() throws {
        let queue = FMDatabaseQueue()
        // The interrupt is sent once the query is stepping (its `running()` call): one sent before its first
        // step would be dropped, as SQLite clears the flag when a statement starts with none running.
        let running = DispatchSemaphore(value: 0)
        let interrupted = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            XCTAssertEqual(running.wait(timeout: .now() + 60), .success, "the query runs")
            queue.interrupt()
            interrupted.signal()
        }
        let result: Int32? = queue.inDatabase { db in
            db.logsErrors = false
            db.makeFunctionNamed("running", arguments: 0) { [weak db] context, _, _ in
                running.signal()
                db?.resultInt(1, context: context)
            }
            // An endless recursive query, stopped only by the interrupt.
            let value = db.int(
                forQuery:
                    "with recursive c(x) as (select 1 union all select x + 1 from c where x <> 1000 or running()) "
                    + "select count(*) from c"
            )
            XCTAssertEqual(db.lastErrorCode(), SQLITE_INTERRUPT)
            return value
        }
        XCTAssertEqual(result, 0)
        interrupted.wait()
    }

    func testCheckpoint() throws {
        let (queue, path) = try makeQueue(.encrypted, name: "wal.db")
        queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode=wal"), "wal")
            for i in 0..<50 { db.executeUpdate("insert into easy values (?)", "\(i)") }
        }
        try queue.checkpoint(.truncate)
        try queue.checkpoint(.passive, name: "main")
        let size = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber
        XCTAssertEqual(size?.intValue, 0)
    }

    /// The queue and the pool agree: a transaction a block left open is rolled back after it (with a
    /// warning), so the next block does not run inside it; result sets it left open are closed, reusable
    /// ones from `prepare` are not.
    func testTransactionLeftOpenByABlockIsRolledBack() throws {
        for mode in StorageMode.allCases {
            let (queue, _) = try makeQueue(mode)
            var prepared: FMResultSet?
            queue.inDatabase { db in
                XCTAssertTrue(db.beginTransaction())
                XCTAssertTrue(db.executeUpdate("insert into easy values ('left open')"))
                _ = db.executeQuery("select * from qfoo")
                prepared = db.prepare("select count(*) from easy")
            }
            queue.inDatabase { db in
                XCTAssertFalse(db.isInTransaction, "\(mode): the next block starts outside any transaction")
                XCTAssertEqual(
                    db.int(forQuery: "select count(*) from easy where a = 'left open'"), 0, "\(mode): rolled back")
                XCTAssertTrue(db.hasOpenResultSets, "\(mode): only the prepared set survives the block")
                XCTAssertTrue(prepared?.bind(withArray: []) ?? false)
                XCTAssertTrue(prepared?.next() ?? false)
                prepared?.close()
                XCTAssertFalse(db.hasOpenResultSets, "\(mode)")
            }
        }
    }

    func testReentrantCallStopsWithAClearMessage() throws {
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        let result = try runProcess(helper, ["queue-reentrant"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertFalse(result.stdout.contains("not reached"))
        XCTAssertTrue(result.stderr.contains("a call was made from inside a block of the same queue"), result.stderr)
    }

    func testCrashOnErrorsStopsWithTheError() throws {
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        let result = try runProcess(helper, ["crash-on-errors"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("crashOnErrors"), result.stderr)
        XCTAssertTrue(result.stderr.contains("syntax error"), result.stderr)
    }
}
