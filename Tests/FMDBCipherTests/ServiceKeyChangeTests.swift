@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A service keeps serving while an operator changes keys: slot changes cost the running queues and
/// pools nothing (no key derivation), and a rekey or data-key rotation made elsewhere in the process
/// reaches every queue and pool on the file at their next connection.
final class ServiceKeyChangeTests: XCTestCase {
    var directory: TemporaryDirectory!
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)

    override func setUpWithError() throws {
        directory = try TemporaryDirectory("fmdb-service-keys")
    }

    override func tearDown() {
        directory = nil
    }

    /// A slotted database with passphrase "alpha" (slot 1) and "beta" (slot 2), and one table.
    func makeSlotted() throws -> String {
        let path = directory.path("service.db")
        try KeySlots.createDatabase(at: path, secret: .passphrase("alpha"), kdf: cheap)
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: cheap)
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha")))
        try queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        queue.close()
        return path
    }

    /// Runs `count` blocks at once on the pool, so it needs (and opens) that many connections; each writes a row.
    func serve(_ pool: FMDatabasePool, _ count: Int, file: StaticString = #filePath, line: UInt = #line) {
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: count) { _ in
            do {
                try pool.inDatabase { db in
                    _ = try db.executeQuery("select count(*) from t", values: nil)
                    usleep(20_000)
                }
                try pool.inTransaction(.immediate) { db in try db.executeUpdate("insert into t values (1)", values: nil)
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [], file: file, line: line)
    }

    func rows(_ pool: FMDatabasePool) -> Int32? {
        pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }
    }

    func testSlotChangesLeaveARunningPoolOpeningConnectionsWithoutAKeyDerivation() throws {
        let path = try makeSlotted()
        let provider = KeySlotKeyProvider(secret: .passphrase("alpha"))
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        serve(pool, 4)
        XCTAssertEqual(provider.derivationCount, 1)

        // The service's own passphrase changes, another is added, the other removed.
        try KeySlots.changeSlot(of: path, from: .passphrase("alpha"), to: .passphrase("alpha-2"), kdf: cheap)
        pool.releaseAllDatabases()
        serve(pool, 4)
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("beta"), newSecret: .passphrase("gamma"), kdf: cheap)
        serve(pool, 4)
        try KeySlots.removeSlot(2, from: path, unlockingWith: .passphrase("gamma"))
        pool.releaseAllDatabases()
        serve(pool, 4)

        XCTAssertEqual(rows(pool), 16)
        XCTAssertEqual(provider.derivationCount, 1, "no key derivation after the first")
        // A new process needs a secret the slot file accepts now.
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha")))
        ) { XCTAssertEqual(nsError($0).code, 26) }
        XCTAssertNoThrow(
            try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha-2"))))
    }

    func testDataKeyRotationReachesAnOpenPoolAndQueueAtTheirNextCall() throws {
        let path = try makeSlotted()
        let provider = KeySlotKeyProvider(secret: .passphrase("alpha"))
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("beta")))
        serve(pool, 3)
        try queue.inDatabase { db in try db.executeUpdate("insert into t values (2)", values: nil) }

        try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("alpha"), .passphrase("beta")])

        serve(pool, 3)
        XCTAssertEqual(try queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 7)
        XCTAssertEqual(rows(pool), 7)
        XCTAssertEqual(provider.derivationCount, 2, "one more unlock for the new data key")
    }

    func testARekeyThroughOneQueueReachesAnotherPoolOnTheSameFile() throws {
        let path = directory.path("plain-rekey.db")
        let old = PBKDF2KeyProvider(passphrase: "old", digest: .sha256, unsafeIterations: 1_000)
        let new = PBKDF2KeyProvider(passphrase: "new", digest: .sha256, unsafeIterations: 1_000)
        let queue = try FMDatabaseQueue(path: path, keyProvider: old)
        try queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        // Another spelling of the same file: the same file all the same.
        let pool = try FMDatabasePool(path: directory.path(".") + "/plain-rekey.db", keyProvider: old)
        serve(pool, 3)

        try queue.rekey(using: new)

        serve(pool, 3)
        XCTAssertEqual(rows(pool), 6)
        XCTAssertEqual(try queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 6)
    }
}
