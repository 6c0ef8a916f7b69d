@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// `rekey(using:)` on the queue and the pool: the data stays, the old key stops working, the WAL is
/// checkpointed, every connection moves to the new key, and a failed rekey leaves the old key in force.
final class QueueAndPoolRekeyTests: FMDBCipherTestCase {
    let oldProvider = PBKDF2KeyProvider(passphrase: "old", digest: .sha256, unsafeIterations: 1_000)
    let newProvider = PBKDF2KeyProvider(passphrase: "new", digest: .sha256, unsafeIterations: 1_000)

    func assertOpens(
        _ path: String, with provider: any KeyProvider, rows: Int32, file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
            XCTAssertEqual(
                queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, rows, file: file, line: line)
            XCTAssertEqual(
                queue.inDatabase { db in db.string(forQuery: "pragma integrity_check") }, "ok", file: file,
                line: line)
        } catch {
            XCTFail("does not open: \(error)", file: file, line: line)
        }
    }

    func assertDoesNotOpen(
        _ path: String, with provider: any KeyProvider, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: provider), file: file, line: line) { error in
            XCTAssertEqual(nsError(error).code, 26, file: file, line: line)
        }
    }

    func walSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    func testQueueRekey() throws {
        for wal in [false, true] {
            let path = directory.path("queue-\(wal).db")
            let queue = try FMDatabaseQueue(path: path, keyProvider: oldProvider)
            try queue.inDatabase { db in
                if wal { _ = db.string(forQuery: "pragma journal_mode=wal") }
                try db.executeUpdate("create table t (a)", values: nil)
                for i in 0..<100 { try db.executeUpdate("insert into t values (?)", values: [i]) }
            }
            try queue.rekey(using: newProvider)
            if wal { XCTAssertEqual(walSize(path), 0, "the WAL was checkpointed (TRUNCATE)") }
            try queue.inDatabase { db in try db.executeUpdate("insert into t values (100)", values: nil) }
            queue.close()
            queue.inDatabase { db in
                XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 101, "reopened with the new key")
            }
            queue.close()
            assertOpens(path, with: newProvider, rows: 101)
            assertDoesNotOpen(path, with: oldProvider)
        }
    }

    func testPoolRekeyMovesEveryConnection() throws {
        let path = directory.path("pool.db")
        let pool = try FMDatabasePool(path: path, keyProvider: oldProvider)
        pool.inDatabase { db in
            _ = db.string(forQuery: "pragma journal_mode=wal")
            db.executeUpdate("create table t (a)")
        }
        // Four connections open.
        pool.inDatabase { _ in pool.inDatabase { _ in pool.inDatabase { _ in pool.inDatabase { _ in } } } }
        XCTAssertEqual(pool.countOfOpenDatabases, 4)
        try pool.rekey(using: newProvider)
        XCTAssertEqual(walSize(path), 0)
        XCTAssertEqual(pool.countOfOpenDatabases, 1, "the other connections were closed, to reopen with the new key")
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            pool.inDatabase { db in XCTAssertTrue(db.executeUpdate("insert into t values (?)", i)) }
        }
        pool.releaseAllDatabases()
        assertOpens(path, with: newProvider, rows: 8)
        assertDoesNotOpen(path, with: oldProvider)
    }

    func testPoolRekeyWaitsForCheckedOutConnections() throws {
        let path = directory.path("wait.db")
        let pool = try FMDatabasePool(path: path, keyProvider: oldProvider)
        pool.inDatabase { db in db.executeUpdate("create table t (a)") }
        let inBlock = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let order = Locked<[String]>([])
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            pool.inDatabase { db in
                inBlock.signal()
                release.wait()
                db.executeUpdate("insert into t values (1)")
                order.withLock { $0.append("block done") }
            }
        }
        inBlock.wait()
        let newProvider = self.newProvider
        DispatchQueue.global().async(group: group) {
            do {
                try pool.rekey(using: newProvider)
                order.withLock { $0.append("rekeyed") }
            } catch {
                XCTFail("rekey failed: \(error)")
            }
        }
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertEqual(order.withLock { $0 }, [], "rekey waits for the checked-out connection")
        release.signal()
        group.wait()
        XCTAssertEqual(order.withLock { $0 }, ["block done", "rekeyed"])
        pool.releaseAllDatabases()
        assertOpens(path, with: newProvider, rows: 1)
    }

    func testFailedRekeyKeepsTheOldKeyForQueueAndPool() throws {
        let path = directory.path("busy.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: oldProvider)
        queue.inDatabase { db in
            db.executeUpdate("create table t (a)")
            db.executeUpdate("insert into t values (1)")
        }
        // Another process-level connection holds the write lock for longer than the rekey's busy timeout.
        let other = FMDatabase(path: path)
        XCTAssertTrue(other.open())
        try other.setKey(using: oldProvider)
        XCTAssertTrue(other.beginExclusiveTransaction())
        let started = Date()
        XCTAssertThrowsError(try queue.rekey(using: newProvider)) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_BUSY))
        }
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 4, "the rekey waited with a busy timeout")
        XCTAssertTrue(other.commit())
        queue.inDatabase { db in XCTAssertTrue(db.executeUpdate("insert into t values (2)")) }
        queue.close()
        let pool = try FMDatabasePool(path: path, keyProvider: oldProvider)
        XCTAssertTrue(other.beginExclusiveTransaction())
        // The queue above waited the default (at least 5 s); the pool waits what it is given.
        let poolStarted = Date()
        XCTAssertThrowsError(try pool.rekey(using: newProvider, busyTimeout: 0.5)) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_BUSY))
        }
        let waited = Date().timeIntervalSince(poolStarted)
        XCTAssertGreaterThan(waited, 0.4, "the pool's rekey waited its busy timeout")
        XCTAssertLessThan(waited, 4.8, "and no longer: an explicit busy timeout replaces the 5 s floor")
        XCTAssertTrue(other.commit())
        other.close()
        pool.inDatabase { db in XCTAssertTrue(db.executeUpdate("insert into t values (3)")) }
        pool.releaseAllDatabases()
        assertOpens(path, with: oldProvider, rows: 3)
        assertDoesNotOpen(path, with: newProvider)
    }

    func testRekeyAfterCloseAndWithTheFMDBStyleCalls() throws {
        let path = directory.path("fmdb-style.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("one"))
        queue.inDatabase { db in
            db.executeUpdate("create table t (a)")
            db.executeUpdate("insert into t values (1)")
            // FMDB code often calls setKey in every block: the same key is a harmless no-op.
            XCTAssertTrue(db.setKey("one"))
        }
        queue.close()
        try queue.rekey(using: PassphraseKeyProvider("two"))
        assertOpens(path, with: PassphraseKeyProvider("two"), rows: 1)
    }
}
