// Sanitizer: thread (Scripts/test runs this file's test classes under ThreadSanitizer)
@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// What a long-running service relies on from a pool: the connection limit holds under load, and its
/// counters tell the truth.
final class FMDatabasePoolServiceTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory("fmdb-pool-service")
    }

    override func tearDown() {
        directory = nil
    }

    func makePool(_ mode: StorageMode, name: String = "pool.db") throws -> FMDatabasePool {
        let path = directory.path("\(mode)-\(name)")
        if let provider = mode.keyProvider { return try FMDatabasePool(path: path, keyProvider: provider) }
        return FMDatabasePool(path: path)
    }

    /// 200 concurrent `perform` calls at a limit of 2: never more than two blocks hold a connection at
    /// once, never more than two distinct connections exist, and `countOfCheckedOutDatabases` (read
    /// inside each block) never passes 2.
    func testLimitHoldsUnderLoadForHoldersAndCounters() async throws {
        for mode in StorageMode.allCases {
            for run in 0..<5 {
                let pool = try makePool(mode, name: "limit-\(run).db")
                pool.inDatabase { db in _ = db.executeStatements("pragma journal_mode=wal; create table if not exists t (a)") }
                pool.maximumNumberOfDatabasesToCreate = 2
                let seen = Locked((holders: 0, peakHolders: 0, peakCounter: 0, peakOpen: 0, connections: Set<ObjectIdentifier>()))
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
                XCTAssertLessThanOrEqual(result.peakHolders, 2, "blocks holding a connection at once (\(mode), run \(run))")
                XCTAssertLessThanOrEqual(result.peakCounter, 2, "countOfCheckedOutDatabases (\(mode), run \(run))")
                XCTAssertLessThanOrEqual(result.peakOpen, 2, "countOfOpenDatabases (\(mode), run \(run))")
                XCTAssertLessThanOrEqual(result.connections.count, 2, "distinct connections (\(mode), run \(run))")
                XCTAssertEqual(pool.countOfCheckedOutDatabases, 0)
                XCTAssertLessThanOrEqual(pool.countOfOpenDatabases, 2)
            }
        }
    }
}
