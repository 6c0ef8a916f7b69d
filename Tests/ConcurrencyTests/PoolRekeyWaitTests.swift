@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A pool's rekey waits for every connection to be checked in without holding off the pool's other key
/// change meanwhile: a block that hands the pool a new key provider is not kept waiting by the rekey that
/// waits for that very block.
final class PoolRekeyWaitTests: FMDBCipherTestCase {
    private static func provider(_ byte: UInt8) throws -> RawKeyProvider {
        try KeyChangeCoordinationTests.provider(byte)
    }

    func testABlockCanReplaceTheKeyProviderWhileARekeyWaitsForIt() throws {
        let path = directory.path("rekey-waits.db")
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
        try pool.inDatabase { db in try db.executeUpdate("create table t (v integer)", values: nil) }
        let inBlock = DispatchSemaphore(value: 0)
        let blockDone = DispatchSemaphore(value: 0)
        let replaceError = Locked<String?>(nil)
        Thread.detachNewThread {
            pool.inDatabase { _ in
                inBlock.signal()
                Thread.sleep(forTimeInterval: 0.3)  // Meanwhile the rekey starts waiting for this block.
                do {
                    try pool.replaceKeyProvider(Self.provider(1))
                } catch {
                    replaceError.withLock { $0 = "\(error)" }
                }
            }
            blockDone.signal()
        }
        inBlock.wait()
        let rekeyed = DispatchSemaphore(value: 0)
        let rekeyError = Locked<String?>(nil)
        Thread.detachNewThread {
            do {
                _ = try pool.rekey(using: Self.provider(2))
            } catch {
                rekeyError.withLock { $0 = "\(error)" }
            }
            rekeyed.signal()
        }
        XCTAssertEqual(
            blockDone.wait(timeout: .now() + 10), .success,
            "the block's replaceKeyProvider waited for the rekey, which waits for the block")
        XCTAssertEqual(rekeyed.wait(timeout: .now() + 10), .success, "the rekey ran once the block returned")
        XCTAssertNil(replaceError.withLock { $0 })
        XCTAssertNil(rekeyError.withLock { $0 })
        // The rekey came last: the file is under key 2, and the pool reads it.
        let queue = try FMDatabaseQueue(path: path, keyProvider: Self.provider(2))
        XCTAssertEqual(queue.inDatabase { $0.int(forQuery: "select count(*) from t") }, 0)
        queue.close()
        XCTAssertEqual(pool.inDatabase { $0.int(forQuery: "select count(*) from t") }, 0)
    }
}
