@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A service keeps serving while an operator changes keys: slot changes cost the running queues and
/// pools nothing (no key derivation), and a rekey or data-key rotation made elsewhere in the process
/// reaches every queue and pool on the file at their next connection.
final class ServiceKeyChangeTests: FMDBCipherTestCase {
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)

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
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 7)
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
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 6)
    }

    /// Rekeys the file on a connection of its own, as another process (or code outside any queue or pool) does.
    func rekeyElsewhere(_ path: String, from old: any KeyProvider, to new: any KeyProvider) throws {
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: old)
        try db.rekeySafely(using: new)
    }

    func makeKeyed(_ provider: any KeyProvider) throws -> String {
        let path = directory.path("keyed.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
        try queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        queue.close()
        return path
    }

    func testReplaceKeyProviderRefusesAKeyThatDoesNotOpenTheFileAndTakesOneThatDoes() throws {
        let old = PBKDF2KeyProvider(passphrase: "old", digest: .sha256, unsafeIterations: 1_000)
        let new = PBKDF2KeyProvider(passphrase: "new", digest: .sha256, unsafeIterations: 1_000)
        let path = try makeKeyed(old)
        let pool = try FMDatabasePool(path: path, keyProvider: old)
        let queue = try FMDatabaseQueue(path: path, keyProvider: old)
        serve(pool, 2)

        XCTAssertThrowsError(try pool.replaceKeyProvider(new)) { XCTAssertEqual(nsError($0).code, 26) }
        XCTAssertThrowsError(try queue.replaceKeyProvider(new)) { XCTAssertEqual(nsError($0).code, 26) }
        serve(pool, 2)
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 4)

        // The operator rekeys from outside; until the service is handed the new key, new connections fail.
        try rekeyElsewhere(path, from: old, to: new)
        XCTAssertThrowsError(try pool.inDatabase { db in try db.executeQuery("select 1 from t", values: nil) })
        try pool.replaceKeyProvider(new)
        try queue.replaceKeyProvider(new)
        serve(pool, 2)
        XCTAssertEqual(rows(pool), 6)
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 6)
    }

    func testAReloadableProviderReadsItsKeyFileAgainAfterARekeyElsewhere() throws {
        let keyFile = directory.path("db.key")
        func writeKey(_ byte: UInt8) throws {
            try Data(repeating: byte, count: 32).write(to: URL(fileURLWithPath: keyFile))
        }
        try writeKey(1)
        let loads = Locked(0)
        let provider = try ReloadableKeyProvider {
            loads.withLock { $0 += 1 }
            return try RawKeyProvider(key: Data(contentsOf: URL(fileURLWithPath: keyFile)))
        }
        let path = try makeKeyed(provider)
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
        serve(pool, 3)

        // Another process rekeys, then writes the new key file (the order a script follows).
        try rekeyElsewhere(
            path, from: RawKeyProvider(key: Data(repeating: 1, count: 32)),
            to: RawKeyProvider(key: Data(repeating: 2, count: 32)))
        try writeKey(2)

        // Idle connections find out at checkout: no request fails.
        serve(pool, 3)
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 6)
        XCTAssertGreaterThan(loads.withLock { $0 }, 1)
    }

    func testABlockRunningWhileTheFileIsRekeyedGetsAClearErrorAndIsNotRunAgain() throws {
        let old = PBKDF2KeyProvider(passphrase: "old", digest: .sha256, unsafeIterations: 1_000)
        let new = PBKDF2KeyProvider(passphrase: "new", digest: .sha256, unsafeIterations: 1_000)
        let path = try makeKeyed(old)
        let pool = try FMDatabasePool(path: path, keyProvider: old)
        let runs = Locked(0)
        XCTAssertThrowsError(
            try pool.inDatabase { db in
                runs.withLock { $0 += 1 }
                try self.rekeyElsewhere(path, from: old, to: new)
                try db.executeUpdate("insert into t values (1)", values: nil)
            }
        ) { error in
            XCTAssertEqual(nsError(error).code, 26)
            XCTAssertTrue(
                (error as? FMDatabaseError)?.message.contains("rekeyed while this block ran") ?? false, "\(error)")
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        XCTAssertEqual(pool.countOfOpenDatabases, 0, "the connection under the old key was closed")
        try pool.replaceKeyProvider(new)
        XCTAssertEqual(rows(pool), 0)
    }
}
