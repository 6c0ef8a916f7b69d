@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// FMDB's Tests/FMDatabasePoolTests.m, each behaviour run on a plain and on an encrypted database.
final class FMDatabasePoolTests: FMDBCipherTestCase {
    func makePool(_ mode: StorageMode, name: String = "pool.db", wal: Bool = false) throws -> (FMDatabasePool, String) {
        let path = directory.path("\(mode)-\(name)")
        let pool = try mode.makePool(at: path)
        pool.inDatabase { db in
            if wal { XCTAssertEqual(db.string(forQuery: "pragma journal_mode=wal"), "wal") }
            db.executeUpdate("create table easy (a text)")
            db.executeUpdate("create table easy2 (a text)")
            db.executeUpdate("insert into easy values ('hi')")
            db.executeUpdate("insert into easy2 values ('hi')")
            db.executeUpdate("create table likefoo (foo text)")
            db.executeUpdate("insert into likefoo values ('hi')")
            db.executeUpdate("insert into likefoo values ('hello')")
            db.executeUpdate("insert into likefoo values ('not')")
        }
        pool.releaseAllDatabases()
        return (pool, path)
    }

    func testPoolIsInitiallyEmpty() throws {
        let plain = FMDatabasePool(path: directory.path("empty.db"))
        XCTAssertEqual(plain.countOfOpenDatabases, 0, "Pool should be empty on creation")
        // A keyed pool opens, keys and verifies one connection at init and keeps it checked in.
        let keyed = try FMDatabasePool(path: directory.path("keyed.db"), keyProvider: PassphraseKeyProvider("k"))
        XCTAssertEqual(keyed.countOfOpenDatabases, 1)
        XCTAssertEqual(keyed.countOfCheckedInDatabases, 1)
        XCTAssertEqual(keyed.maximumNumberOfDatabasesToCreate, 0, "no limit by default")
    }

    func testDatabaseCreation() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            var db1: FMDatabase?
            pool.inDatabase { db in
                XCTAssertEqual(pool.countOfOpenDatabases, 1)
                db1 = db
            }
            pool.inDatabase { db in
                XCTAssertTrue(db === db1, "the checked-in connection is reused")
                pool.inDatabase { db2 in
                    XCTAssertFalse(db2 === db, "a nested call gets its own connection")
                    XCTAssertEqual(db2.int(forQuery: "select count(*) from likefoo"), 3, "\(mode)")
                }
            }
            XCTAssertEqual(pool.countOfOpenDatabases, 2)
            pool.releaseAllDatabases()
            XCTAssertEqual(pool.countOfOpenDatabases, 0)
        }
    }

    func testCheckedInCheckoutOutCount() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            pool.inDatabase { aDb in
                XCTAssertEqual(pool.countOfCheckedInDatabases, 0)
                XCTAssertEqual(pool.countOfCheckedOutDatabases, 1)
                XCTAssertTrue(aDb.checkedOut)
                XCTAssertTrue(aDb.executeUpdate("insert into easy (a) values (?)", "hi"))
                // Just for fun: a nested block.
                pool.inDatabase { bDb in
                    XCTAssertEqual(pool.countOfCheckedOutDatabases, 2)
                    XCTAssertEqual(bDb.int(forQuery: "select count(*) from easy"), 2)
                }
                XCTAssertEqual(pool.countOfCheckedInDatabases, 1)
                XCTAssertEqual(pool.countOfCheckedOutDatabases, 1)
            }
            XCTAssertEqual(pool.countOfCheckedInDatabases, 2)
            XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
            XCTAssertEqual(pool.countOfOpenDatabases, 2)
        }
    }

    func testMaximumNumberOfDatabasesToCreateMakesCallsWait() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode, wal: true)
            pool.maximumNumberOfDatabasesToCreate = 2
            let peak = Locked((current: 0, max: 0))
            // Eight threads at once; the first two blocks wait for each other, so the limit is reached for
            // certain (and a pool that let a third in would show it in `max`).
            let together = Rendezvous(parties: 2)
            onThreads(8) { _ in
                pool.inDatabase { db in
                    peak.withLock {
                        $0.current += 1; $0.max = max($0.max, $0.current)
                    }
                    XCTAssertEqual(db.int(forQuery: "select count(*) from likefoo"), 3)
                    XCTAssertTrue(together.arrive(), "two blocks at once")
                    Thread.sleep(forTimeInterval: 0.02)
                    peak.withLock { $0.current -= 1 }
                }
            }
            XCTAssertLessThanOrEqual(pool.countOfOpenDatabases, 2, "\(mode)")
            XCTAssertEqual(peak.withLock { $0.max }, 2, "calls waited instead of getting nil: \(mode)")
        }
    }

    func testNestedCallAtTheLimitStopsWithAClearMessage() throws {
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        let result = try runProcess(helper, ["pool-nested-at-limit"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertFalse(result.stdout.contains("not reached"))
        XCTAssertTrue(result.stderr.contains("could never be served"), result.stderr)
        let rekey = try runProcess(helper, ["pool-rekey-inside-block"])
        XCTAssertNotEqual(rekey.status, 0)
        XCTAssertTrue(rekey.stderr.contains("would deadlock"), rekey.stderr)
    }

    func testTransaction() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            pool.inTransaction { adb, _ in
                adb.executeUpdate("insert into easy values (?)", 1001)
                adb.executeUpdate("insert into easy values (?)", 1002)
                adb.executeUpdate("insert into easy values (?)", 1003)
                XCTAssertEqual(pool.countOfCheckedInDatabases, 0)
                XCTAssertEqual(pool.countOfCheckedOutDatabases, 1)
            }
            XCTAssertEqual(pool.countOfCheckedInDatabases, 1)
            XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
            pool.inDatabase { db in
                XCTAssertEqual(
                    db.int(forQuery: "select count(*) from easy where a in ('1001', '1002', '1003')"), 3, "\(mode)")
            }
        }
    }

    /// Same rule as the queue's: a transaction a block left open is rolled back at check-in.
    func testTransactionLeftOpenByABlockIsRolledBack() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            pool.maximumNumberOfDatabasesToCreate = 1
            pool.inDatabase { db in
                XCTAssertTrue(db.beginTransaction())
                XCTAssertTrue(db.executeUpdate("insert into easy values ('left open')"))
                _ = db.executeQuery("select * from easy")
            }
            pool.inDatabase { db in
                XCTAssertFalse(db.isInTransaction, "\(mode)")
                XCTAssertFalse(db.hasOpenResultSets, "\(mode)")
                XCTAssertEqual(
                    db.int(forQuery: "select count(*) from easy where a = 'left open'"), 0, "\(mode): rolled back")
            }
        }
    }

    func testSelect() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            pool.inDatabase { db in db.executeUpdate("insert into easy values (?)", 1001) }
            pool.inDatabase { db in
                let rs = db.executeQuery("select * from easy where a = ?", 1001)
                XCTAssertTrue(rs?.next() ?? false)
                XCTAssertFalse(rs?.next() ?? true)
            }
        }
    }

    func testTransactionRollback() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            for begin in [
                pool.inTransaction, pool.inDeferredTransaction, pool.inImmediateTransaction,
                pool.inExclusiveTransaction,
            ] {
                begin { adb, rollback in
                    XCTAssertTrue(adb.executeUpdate("insert into easy values (?)", 1001))
                    rollback.pointee = true
                }
            }
            pool.inDatabase { db in
                XCTAssertEqual(db.int(forQuery: "select count(*) from easy where a = '1001'"), 0, "\(mode)")
            }
        }
    }

    func testSavepoint() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            let err = pool.inSavePoint { db, rollback in
                db.executeUpdate("insert into easy values (?)", 1001)
                rollback.pointee = true
            }
            XCTAssertNil(err)
            pool.inDatabase { db in
                XCTAssertEqual(db.int(forQuery: "select count(*) from easy where a = '1001'"), 0, "\(mode)")
            }
        }
    }

    func testNestedSavepointRollback() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            let err = pool.inSavePoint { adb, _ in
                XCTAssertTrue(adb.executeUpdate("insert into easy values (?)", 1001))
                let inner = adb.inSavePoint { rollback in
                    XCTAssertTrue(adb.executeUpdate("insert into easy values (?)", 1002))
                    rollback.pointee = true
                }
                XCTAssertNil(inner)
            }
            XCTAssertNil(err)
            pool.inDatabase { db in
                XCTAssertEqual(db.int(forQuery: "select count(*) from easy where a = '1001'"), 1, "\(mode)")
                XCTAssertEqual(db.int(forQuery: "select count(*) from easy where a = '1002'"), 0, "\(mode)")
            }
        }
    }

    func testLikeStringQuery() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            pool.inDatabase { db in
                var count = 0
                let rsl = db.executeQuery("select * from likefoo where foo like 'h%'")
                while rsl?.next() ?? false { count += 1 }
                XCTAssertEqual(count, 2)
                count = 0
                let rs2 = db.executeQuery("select * from likefoo where foo like ?", "h%")
                while rs2?.next() ?? false { count += 1 }
                XCTAssertEqual(count, 2)
            }
        }
    }

    func testStressTest() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode, wal: true)
            let ops = 16
            DispatchQueue.concurrentPerform(iterations: ops) { nby in
                if nby % 2 == 1 {
                    Thread.sleep(forTimeInterval: 0.001)
                    pool.inTransaction { db, _ in
                        let rsl = db.executeQuery("select * from likefoo where foo like 'h%'")
                        while rsl?.next() ?? false {}
                    }
                }
                if nby % 3 == 1 { Thread.sleep(forTimeInterval: 0.001) }
                pool.inTransaction { db, _ in
                    XCTAssertTrue(db.executeUpdate("insert into likefoo values ('1')"))
                    XCTAssertTrue(db.executeUpdate("insert into likefoo values ('2')"))
                    XCTAssertTrue(db.executeUpdate("insert into likefoo values ('3')"))
                }
            }
            pool.releaseAllDatabases()
            pool.inDatabase { db in
                XCTAssertTrue(db.executeUpdate("insert into likefoo values ('1')"))
                XCTAssertEqual(db.int(forQuery: "select count(*) from likefoo"), Int32(3 + ops * 3 + 1), "\(mode)")
            }
        }
    }

    func testReadWriteStressTest() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode, wal: true)
            pool.inDatabase { db in db.executeUpdate("create table counter (n integer)") }
            let errors = Locked(0)
            DispatchQueue.concurrentPerform(iterations: 200) { i in
                if i % 4 == 0 {
                    pool.inImmediateTransaction { db, _ in
                        if !db.executeUpdate("insert into counter values (?)", i) { errors.withLock { $0 += 1 } }
                    }
                } else {
                    pool.inDatabase { db in
                        let rs = db.executeQuery("select count(*) from counter")
                        if rs?.next() != true { errors.withLock { $0 += 1 } }
                        rs?.close()
                    }
                }
            }
            XCTAssertEqual(errors.withLock { $0 }, 0, "\(mode)")
            pool.inDatabase { db in XCTAssertEqual(db.int(forQuery: "select count(*) from counter"), 50) }
        }
    }

    final class Delegate: FMDatabasePoolDelegate {
        let refuse: Bool
        let added = Locked(0)
        let asked = Locked(0)
        init(refuse: Bool) { self.refuse = refuse }
        func databasePool(_ pool: FMDatabasePool, shouldAddDatabaseToPool database: FMDatabase) -> Bool {
            asked.withLock { $0 += 1 }
            return !refuse
        }
        func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {
            added.withLock { $0 += 1 }
        }
    }

    func testDelegateIsAskedAndTold() throws {
        let (pool, _) = try makePool(.plain)
        let delegate = Delegate(refuse: false)
        pool.delegate = delegate
        pool.inDatabase { _ in pool.inDatabase { _ in } }
        pool.inDatabase { _ in }
        XCTAssertEqual(delegate.added.withLock { $0 }, 2, "two new connections joined")
        XCTAssertEqual(delegate.asked.withLock { $0 }, 3, "asked at every checkout")
        XCTAssertTrue(pool.delegate === delegate)
    }

    func testDelegateThatRefusesMeansTheBlockIsNotCalled() throws {
        for mode in StorageMode.allCases {
            let (pool, _) = try makePool(mode)
            let delegate = Delegate(refuse: true)
            pool.delegate = delegate
            var called = false
            pool.inDatabase { _ in called = true }
            pool.inTransaction { _, _ in called = true }
            XCTAssertNotNil(pool.inSavePoint { _, _ in called = true })
            XCTAssertThrowsError(
                try pool.inDatabase { _ -> Int in
                    called = true; try Task.checkCancellation(); return 1
                })
            XCTAssertFalse(called, "\(mode)")
            XCTAssertEqual((pool.lastError as NSError?)?.code, Int(SQLITE_MISUSE))
            XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
        }
    }

    func testWrongKeyThrowsFromTheInitializer() throws {
        let (pool, path) = try makePool(.encrypted)
        pool.releaseAllDatabases()
        XCTAssertThrowsError(try FMDatabasePool(path: path, keyProvider: PassphraseKeyProvider("wrong"))) { error in
            XCTAssertEqual(nsError(error).code, 26)
        }
    }

    func testEveryConnectionIsKeyedAndAPoolDerivesOnce() throws {
        let provider = PBKDF2KeyProvider(passphrase: "once", digest: .sha512, unsafeIterations: 2_000)
        let path = directory.path("once.db")
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        pool.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode=wal"), "wal")
            db.executeUpdate("create table t (a)")
        }
        let opened = Locked(Set<ObjectIdentifier>())
        let barrier = DispatchGroup()
        // Eight threads inside the pool at once: eight connections.
        let gate = DispatchSemaphore(value: 0)
        for _ in 0..<8 {
            barrier.enter()
            Thread.detachNewThread {
                pool.inDatabase { db in
                    opened.withLock { _ = $0.insert(ObjectIdentifier(db)) }
                    XCTAssertEqual(db.int(forQuery: "pragma temp_store"), 2, "keyed before its first statement")
                    XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                    gate.wait()
                }
                barrier.leave()
            }
        }
        let patience = Date().addingTimeInterval(60)
        while pool.countOfCheckedOutDatabases < 8, Date() < patience { Thread.sleep(forTimeInterval: 0.01) }
        for _ in 0..<8 { gate.signal() }
        barrier.wait()
        XCTAssertEqual(opened.withLock { $0.count }, 8)
        XCTAssertEqual(pool.countOfOpenDatabases, 8)
        XCTAssertEqual(provider.derivationCount, 1, "a pool of 8 connections costs one derivation")
    }

    func testSwiftNativeVariants() async throws {
        let (pool, _) = try makePool(.encrypted, wal: true)
        let count: Int32 = try pool.inDatabase { db in
            let rs = try db.executeQuery("select count(*) from likefoo", values: nil)
            _ = rs.next()
            return rs.int(forColumnIndex: 0)
        }
        XCTAssertEqual(count, 3)
        struct Boom: Error {}
        XCTAssertThrowsError(
            try pool.inTransaction(.immediate) { db in
                try db.executeUpdate("insert into likefoo values ('x')", values: nil)
                throw Boom()
            })
        let counts = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<4 {
                group.addTask { try await pool.perform { db in db.int(forQuery: "select count(*) from likefoo") } }
            }
            var all: [Int32] = []
            for try await c in group { all.append(c) }
            return all
        }
        XCTAssertEqual(counts, [3, 3, 3, 3])
        let id = try await pool.performTransaction(.immediate) { db in
            try db.executeUpdate("insert into likefoo values ('async')", values: nil)
            return db.lastInsertRowId
        }
        XCTAssertGreaterThan(id, 0)
    }
}
