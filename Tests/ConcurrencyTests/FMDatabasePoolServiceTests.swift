@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// What a long-running service relies on from a pool: the connection limit holds under load, and its
/// counters tell the truth.
final class FMDatabasePoolServiceTests: FMDBCipherTestCase {
    func makePool(_ mode: StorageMode, name: String = "pool.db") throws -> FMDatabasePool {
        let path = directory.path("\(mode)-\(name)")
        return try mode.makePool(at: path)
    }

    /// 200 concurrent `perform` calls at a limit of 2: never more than two blocks hold a connection at
    /// once, never more than two distinct connections exist, and `countOfCheckedOutDatabases` (read
    /// inside each block) never passes 2.
    func testLimitHoldsUnderLoadForHoldersAndCounters() async throws {
        for mode in StorageMode.allCases {
            for run in 0..<5 {
                let pool = try makePool(mode, name: "limit-\(run).db")
                pool.inDatabase { db in
                    _ = db.executeStatements("pragma journal_mode=wal; create table if not exists t (a)")
                }
                pool.maximumNumberOfDatabasesToCreate = 2
                let seen = Locked(
                    (holders: 0, peakHolders: 0, peakCounter: 0, peakOpen: 0, connections: Set<ObjectIdentifier>()))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<200 {
                        group.addTask {
                            try await pool.perform { db in
                                let counter = pool.countOfCheckedOutDatabases
                                let open = pool.countOfOpenDatabases
                                seen.withLock {
                                    $0.holders += 1
                                    $0.peakHolders = max($0.peakHolders, $0.holders)
                                    $0.peakCounter = max($0.peakCounter, counter)
                                    $0.peakOpen = max($0.peakOpen, open)
                                    $0.connections.insert(ObjectIdentifier(db))
                                }
                                Thread.sleep(forTimeInterval: 0.001)
                                seen.withLock { $0.holders -= 1 }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let result = seen.withLock { $0 }
                XCTAssertLessThanOrEqual(
                    result.peakHolders, 2, "blocks holding a connection at once (\(mode), run \(run))")
                XCTAssertLessThanOrEqual(result.peakCounter, 2, "countOfCheckedOutDatabases (\(mode), run \(run))")
                XCTAssertLessThanOrEqual(result.peakOpen, 2, "countOfOpenDatabases (\(mode), run \(run))")
                XCTAssertLessThanOrEqual(result.connections.count, 2, "distinct connections (\(mode), run \(run))")
                XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
                XCTAssertLessThanOrEqual(pool.countOfOpenDatabases, 2)
            }
        }
    }

    // MARK: - Every connection is set up before a block sees it

    final class ForeignKeysDelegate: FMDatabasePoolDelegate {
        let added = Locked(0)
        func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {
            added.withLock { $0 += 1 }
            database.executeUpdate("PRAGMA foreign_keys = ON")
        }
    }

    /// Runs 40 blocks, up to 4 at once (the first two wait for each other: at least two connections for
    /// certain), and returns how many saw `PRAGMA foreign_keys` off.
    func blocksWithForeignKeysOff(_ pool: FMDatabasePool) async throws -> Int {
        pool.maximumNumberOfDatabasesToCreate = 4
        let off = Locked(0)
        let together = Rendezvous(parties: 2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await pool.perform { db in
                        if db.int(forQuery: "PRAGMA foreign_keys") != 1 { off.withLock { $0 += 1 } }
                        XCTAssertTrue(together.arrive(), "two blocks at once")
                        Thread.sleep(forTimeInterval: 0.001)
                    }
                }
            }
            try await group.waitForAll()
        }
        return off.withLock { $0 }
    }

    /// FMDB's way: a delegate set after init is told about every connection a block can get, the one the
    /// keyed init opened to verify the key included.
    func testDelegateSetAfterAKeyedInitIsToldAboutTheInitConnection() async throws {
        let pool = try FMDatabasePool(
            path: directory.path("delegate.db"), keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider))
        let delegate = ForeignKeysDelegate()
        pool.delegate = delegate
        let off = try await blocksWithForeignKeysOff(pool)
        XCTAssertEqual(off, 0, "blocks that ran with foreign keys off")
        XCTAssertEqual(delegate.added.withLock { $0 }, pool.countOfOpenDatabases, "told once per connection")
    }

    func testPrepareDatabaseSetsUpEveryConnectionBeforeItsFirstBlock() async throws {
        let prepared = Locked(0)
        let pool = try FMDatabasePool(
            path: directory.path("prepare.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                prepareDatabase: { db in
                    XCTAssertEqual(db.int(forQuery: "PRAGMA temp_store"), 2, "keyed before it is set up")
                    try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
                    prepared.withLock { $0 += 1 }
                }))
        XCTAssertEqual(prepared.withLock { $0 }, 1, "the connection the init opened")
        let off = try await blocksWithForeignKeysOff(pool)
        XCTAssertEqual(off, 0)
        XCTAssertEqual(prepared.withLock { $0 }, pool.countOfOpenDatabases)
        XCTAssertGreaterThan(pool.countOfOpenDatabases, 1)
    }

    struct SetUpFailed: Error {}

    func testPrepareDatabaseThatThrowsAtInitFailsTheInit() throws {
        XCTAssertThrowsError(
            try FMDatabasePool(
                path: directory.path("throws.db"),
                configuration: FMDatabaseConfiguration(
                    keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                    prepareDatabase: { _ in throw SetUpFailed() }))
        ) { error in
            XCTAssertTrue(error is SetUpFailed, "\(error)")
        }
    }

    func testConnectionWhosePrepareDatabaseThrowsIsNotUsed() throws {
        let calls = Locked(0)
        let pool = try FMDatabasePool(
            path: directory.path("second.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                prepareDatabase: { _ in
                    let call = calls.withLock {
                        $0 += 1; return $0
                    }
                    if call == 2 { throw SetUpFailed() }
                }))
        var ranNested = false
        pool.inDatabase { _ in
            do {
                try pool.inDatabase { _ in
                    ranNested = true; try Task.checkCancellation()
                }
                XCTFail("the nested call did not throw")
            } catch {
                XCTAssertTrue(error is SetUpFailed, "\(error)")
            }
        }
        XCTAssertFalse(ranNested, "no block got the connection that failed its set-up")
        XCTAssertEqual(pool.countOfOpenDatabases, 1, "the failed connection was closed, not pooled")
        XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
        pool.inDatabase { _ in pool.inDatabase { db in XCTAssertTrue(db.isOpen) } }
        XCTAssertEqual(pool.countOfOpenDatabases, 2)
    }

    func testRekeyKeepsEveryConnectionSetUp() async throws {
        let pool = try FMDatabasePool(
            path: directory.path("rekey.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider),
                prepareDatabase: { db in
                    try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil)
                }))
        _ = try await blocksWithForeignKeysOff(pool)
        try await pool.rekey(using: PassphraseKeyProvider("new key"))
        let off = try await blocksWithForeignKeysOff(pool)
        XCTAssertEqual(off, 0)
    }

    // MARK: - Errors are reported once

    func testAnErrorTheCallerCatchesIsNotAlsoLogged() async throws {
        let capture = LogCapture()
        let pool = try FMDatabasePool(
            path: directory.path("once.db"),
            configuration: FMDatabaseConfiguration(
                keyProvider: try XCTUnwrap(StorageMode.encrypted.keyProvider), logger: capture.logger()))
        try pool.inDatabase { db in
            try db.executeUpdate("CREATE TABLE t (a UNIQUE)", values: nil);
            try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
        }
        XCTAssertThrowsError(
            try pool.inDatabase { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) })
        XCTAssertThrowsError(
            try pool.inTransaction(.immediate) { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) })
        do {
            try await pool.performTransaction { db in try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil) }
            XCTFail("no error")
        } catch {}
        XCTAssertEqual(capture.all.filter { $0.hasPrefix("error") }, [])
        pool.inDatabase { db in XCTAssertFalse(db.executeUpdate("INSERT INTO t VALUES (1)")) }
        XCTAssertEqual(capture.all.filter { $0.hasPrefix("error") }.count, 3, "the Bool form logs, as FMDB")
    }
}
