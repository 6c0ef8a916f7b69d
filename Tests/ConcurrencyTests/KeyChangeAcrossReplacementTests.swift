@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// In-process key-change coordination follows the path, not the file that was there when a queue or pool was
/// made: after the file at the path is replaced (a restore from a backup renamed over it), queues and pools
/// made before and after hear each other's rekeys and serve the file at the path, with every acknowledged
/// write; a queue or pool whose path now leads to another file is not handed a provider meant for the old one.
final class KeyChangeAcrossReplacementTests: FMDBCipherTestCase {
    let old = PBKDF2KeyProvider(passphrase: "old", digest: .sha256, unsafeIterations: 1_000)
    let new = PBKDF2KeyProvider(passphrase: "new", digest: .sha256, unsafeIterations: 1_000)
    let newer = PBKDF2KeyProvider(passphrase: "newer", digest: .sha256, unsafeIterations: 1_000)

    /// A database at `path` under `provider` in `journalMode`, with table t holding `rows` rows; closed.
    func make(_ path: String, _ provider: any KeyProvider, journalMode: String, rows: Int) throws {
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
        try queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = \(journalMode)"), journalMode)
            try db.executeUpdate("create table t (v integer)", values: nil)
            for _ in 0..<rows { try db.executeUpdate("insert into t values (0)", values: nil) }
        }
        queue.close()
    }

    /// Writes `count` rows through `pool` from `count` threads at once (so it uses several connections);
    /// returns the errors.
    func serve(_ pool: FMDatabasePool, _ count: Int) -> [String] {
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: count) { _ in
            do {
                try pool.inDatabase { db in
                    _ = try db.executeQuery("select count(*) from t", values: nil)
                    usleep(10_000)
                }
                try pool.inTransaction(.immediate) { db in
                    try db.executeUpdate("insert into t values (1)", values: nil)
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        return failures.withLock { $0 }
    }

    /// Rows of the file at `path`, opened afresh with `provider` (nil: it does not open with it).
    func rows(_ path: String, _ provider: any KeyProvider) -> Int32? {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open(withFlags: SQLITE_OPEN_READWRITE) else { return nil }
        defer { db.close() }
        guard (try? db.setKey(using: provider)) != nil else { return nil }
        return db.int(forQuery: "select count(*) from t")
    }

    /// Pool A and queue A made before the file at the path is replaced by a rename, pool B after; in DELETE
    /// mode A's connections stay open across the replacement, in WAL mode they are released first (replacing
    /// a WAL database under open connections would leave its `-wal` to the new file). A rekey through B reaches
    /// A; one through A reaches B; every write any of them acknowledged is in the file at the path.
    func replaceAndRekey(journalMode: String) throws {
        let path = directory.path("live-\(journalMode).db")
        try make(path, old, journalMode: journalMode, rows: 0)
        let poolA = try FMDatabasePool(path: path, keyProvider: old)
        let queueA = try FMDatabaseQueue(path: path, keyProvider: old)
        XCTAssertEqual(serve(poolA, 3), [])
        try queueA.inDatabase { db in try db.executeUpdate("insert into t values (2)", values: nil) }

        // A restore: a backup with 5 rows, under the same key, renamed over the path.
        let backup = directory.path("backup-\(journalMode).db")
        try make(backup, old, journalMode: journalMode, rows: 5)
        if journalMode == "wal" {
            poolA.releaseAllDatabases()
            queueA.close()
        }
        XCTAssertEqual(rename(backup, path), 0)
        KeyChangeCoordinationTests.waitOutKeyCheckInterval()
        var acknowledged: Int32 = 5

        let poolB = try FMDatabasePool(path: path, keyProvider: old)
        // A serves the file now at the path, not the one it opened before.
        XCTAssertEqual(serve(poolA, 3), [], "pool A after the replacement")
        try queueA.inDatabase { db in try db.executeUpdate("insert into t values (2)", values: nil) }
        acknowledged += 4
        XCTAssertEqual(rows(path, old), acknowledged, "writes through A after the replacement are in the file")

        // A rekey through the pool made after reaches the pool and the queue made before.
        try poolB.rekey(using: new)
        XCTAssertEqual(serve(poolA, 3), [], "pool A after B's rekey")
        try queueA.inDatabase { db in try db.executeUpdate("insert into t values (2)", values: nil) }
        XCTAssertEqual(serve(poolB, 2), [], "pool B after its rekey")
        acknowledged += 6
        XCTAssertEqual(rows(path, new), acknowledged)

        // And one through the pool made before reaches the pool made after (and the queue).
        KeyChangeCoordinationTests.waitOutKeyCheckInterval()
        try poolA.rekey(using: newer)
        XCTAssertEqual(serve(poolB, 3), [], "pool B after A's rekey")
        try queueA.inDatabase { db in try db.executeUpdate("insert into t values (2)", values: nil) }
        acknowledged += 4
        XCTAssertEqual(rows(path, newer), acknowledged)
        XCTAssertNil(rows(path, new))
        XCTAssertEqual(poolB.inDatabase { db in db.int(forQuery: "select count(*) from t") }, acknowledged)
        XCTAssertEqual(queueA.inDatabase { db in db.int(forQuery: "select count(*) from t") }, acknowledged)
    }

    func testQueuesAndPoolsMadeBeforeAndAfterAReplacementHearEachOthersRekeys() throws {
        try replaceAndRekey(journalMode: "delete")
    }

    func testInWALModeQueuesAndPoolsMadeBeforeAndAfterAReplacementHearEachOthersRekeys() throws {
        try replaceAndRekey(journalMode: "wal")
    }

    /// A pool that runs only immediate transactions (not key-checked before their block; their BEGIN reads the
    /// old file fine) after the file at its path is replaced: a block whose write meets the old file fails
    /// (SQLite refuses it: code 8, `SQLITE_READONLY_DBMOVED`), its connection is replaced, and every later one
    /// writes the file at the path.
    func testImmediateTransactionsAfterAReplacementMoveToTheFileAtThePath() throws {
        let path = directory.path("immediate.db")
        try make(path, old, journalMode: "delete", rows: 0)
        let pool = try FMDatabasePool(path: path, keyProvider: old)
        try pool.inTransaction(.immediate) { db in try db.executeUpdate("insert into t values (1)", values: nil) }
        let backup = directory.path("immediate-backup.db")
        try make(backup, old, journalMode: "delete", rows: 5)
        XCTAssertEqual(rename(backup, path), 0)

        var failed = 0
        for _ in 0..<4 {
            do {
                try pool.inTransaction(.immediate) { db in try db.executeUpdate("insert into t values (1)", values: nil)
                }
            } catch {
                failed += 1
                XCTAssertEqual(nsError(error).code & 0xFF, Int(SQLITE_READONLY), "\(error)")
            }
        }
        XCTAssertLessThanOrEqual(failed, 1, "at most the block that met the old file fails")
        XCTAssertEqual(rows(path, old), 5 + Int32(4 - failed), "every acknowledged write is in the file at the path")
    }

    /// The file a pool opened is renamed away (kept as `.old`) and a restored backup takes its path; a pool
    /// on the renamed file rekeys it. The pool on the path is not told (its path leads to the backup, still
    /// under the old key) and keeps serving it; the rekeyed file opens with the new key.
    func testARekeyOfAFileRenamedAwayIsNotHandedToAPoolWhosePathLeadsElsewhere() throws {
        let path = directory.path("moved.db")
        let aside = directory.path("moved.db.old")
        try make(path, old, journalMode: "delete", rows: 1)
        let poolA = try FMDatabasePool(path: path, keyProvider: old)
        XCTAssertEqual(serve(poolA, 2), [])
        poolA.releaseAllDatabases()

        XCTAssertEqual(rename(path, aside), 0)
        let backup = directory.path("moved-backup.db")
        try make(backup, old, journalMode: "delete", rows: 5)
        XCTAssertEqual(rename(backup, path), 0)

        let poolC = try FMDatabasePool(path: aside, keyProvider: old)
        try poolC.rekey(using: new)
        KeyChangeCoordinationTests.waitOutKeyCheckInterval()

        XCTAssertEqual(serve(poolA, 2), [], "the pool on the path keeps the key of the file at its path")
        XCTAssertEqual(rows(path, old), 7)
        XCTAssertEqual(rows(aside, new), 3)
        XCTAssertEqual(serve(poolC, 1), [])
    }

    /// SQLite opens the target of a symbolic link: a link swapped to another file is a move too. A rekey
    /// through the pool then runs on the file the link leads to now (whose key the pool does not hold: it is
    /// refused), never on the old target, which keeps its key.
    func testASymbolicLinkSwappedToAnotherFileIsAMove() throws {
        let a = directory.path("a.db")
        let b = directory.path("b.db")
        let link = directory.path("current.db")
        try make(a, old, journalMode: "delete", rows: 2)
        try make(b, new, journalMode: "delete", rows: 3)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: a)
        let pool = try FMDatabasePool(
            path: link, configuration: FMDatabaseConfiguration(keyProvider: old, logsErrors: false))
        defer { pool.releaseAllDatabases() }
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 2)
        try FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: b)
        XCTAssertThrowsError(try pool.rekey(using: newer)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_NOTADB), "\(error)")
        }
        XCTAssertEqual(rows(a, old), 2, "the old target keeps its key")
        XCTAssertEqual(rows(b, new), 3, "the file at the link keeps its key")
        try pool.replaceKeyProvider(new)
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 3, "serves b now")
    }
}
