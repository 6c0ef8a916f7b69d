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
        KeyChangeCoordinationTests.waitOutKeyCheckInterval()

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
        KeyChangeCoordinationTests.waitOutKeyCheckInterval()
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

    // MARK: - The service's own slot removed

    /// The slot the service unlocked is removed while it runs: its pool keeps opening connections with
    /// the data key it holds (no key derivation), and a new process cannot open with the removed secret.
    func testRemovingTheServicesOwnSlotLeavesItServingAndLocksOutTheRemovedSecret() throws {
        let path = try makeSlotted()
        let provider = KeySlotKeyProvider(secret: .passphrase("alpha"))
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        serve(pool, 3)

        try KeySlots.removeSlot(1, from: path, unlockingWith: .passphrase("beta"))
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [2], "alpha's slot is gone")
        pool.releaseAllDatabases()
        serve(pool, 3)
        XCTAssertEqual(rows(pool), 6)
        XCTAssertEqual(provider.derivationCount, 1, "the held data key: no key derivation")

        // A new process with the removed secret: the tool, and a fresh provider in this one.
        let refused = try runTool(["sql", path, "--key-env", "K", "select count(*) from t"], env: ["K": "alpha"])
        XCTAssertNotEqual(refused.status, 0, refused.stderr)
        XCTAssertEqual(refused.stdout, "", "nothing read with the removed secret")
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha")))
        ) { XCTAssertEqual(nsError($0).code, 26) }
        let opened = try runTool(["sql", path, "--key-env", "K", "select count(*) from t"], env: ["K": "beta"])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertEqual(opened.stdout.split(separator: "\n").last, "6", opened.stdout)
    }

    // MARK: - A secret no slot accepts costs one key derivation per slot file

    /// After a data-key rotation that dropped the service's slot, its provider's secret opens no slot:
    /// each new connection fails, but only the first attempt on that slot file runs a key derivation; a
    /// changed slot file is tried again.
    func testASecretNoSlotAcceptsRunsNoKeyDerivationAgainForTheSameSlotFile() throws {
        let path = try makeSlotted()
        let provider = KeySlotKeyProvider(secret: .passphrase("alpha"))
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        serve(pool, 2)
        _ = try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("beta")], droppingUnmatchedSlots: true)
        pool.releaseAllDatabases()

        let meter = KeySlotWorkBudget.Meter()
        let read = { try pool.inDatabase { db in _ = try db.executeQuery("select count(*) from t", values: nil) } }
        try KeySlotWorkBudget.$meter.withValue(meter) {
            XCTAssertThrowsError(try read()) { XCTAssertEqual(nsError($0).code, 26) }
        }
        let first = meter.derivations
        XCTAssertGreaterThan(first, 0, "the first attempt unlocks the new slot file")
        try KeySlotWorkBudget.$meter.withValue(meter) {
            for _ in 0..<5 {
                XCTAssertThrowsError(try read()) { XCTAssertEqual(nsError($0).code, 26) }
                XCTAssertThrowsError(
                    try pool.inTransaction(.immediate) { db in
                        try db.executeUpdate("insert into t values (1)", values: nil)
                    })
            }
        }
        XCTAssertEqual(meter.derivations, first, "the same slot file: no key derivation again")

        // The operator gives the service's secret a slot again: the changed file is unlocked, and it serves.
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("beta"), newSecret: .passphrase("alpha"), kdf: cheap)
        try KeySlotWorkBudget.$meter.withValue(meter) { try read() }  // On this thread: the meter is task-local.
        serve(pool, 2)
        XCTAssertGreaterThan(meter.derivations, first, "a changed slot file is tried again")
        XCTAssertEqual(rows(pool), 4)
    }

    // MARK: - A provider that needs an existing database creates no file

    /// Names created in `folder` from now on (inotify: a file made and removed again is seen too).
    final class CreationWatch {
        let fd: Int32

        init(_ folder: String) throws {
            fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            guard fd >= 0, inotify_add_watch(fd, folder, UInt32(IN_CREATE)) >= 0 else {
                throw NSError(domain: NSPOSIXErrorDomain, code: Int(errno))
            }
        }

        /// The names created since the last call.
        func created() -> [String] {
            var names: [String] = []
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard count > 0 else { return names }
                var offset = 0
                while offset + 16 <= count {
                    let length = buffer[(offset + 12)..<(offset + 16)].reversed().reduce(0) { $0 << 8 | Int($1) }
                    let name = buffer[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 }
                    names.append(String(decoding: name, as: UTF8.self))
                    offset += 16 + length
                }
            }
        }

        deinit { close(fd) }
    }

    /// A key slot provider, also wrapped in a `ReloadableKeyProvider` or made from a systemd credential,
    /// keys only a database that exists: a queue or pool opening a missing path fails before any file is
    /// made (not made and removed after).
    func testAWrappedKeySlotProviderCreatesNoFileWhereNoDatabaseIs() throws {
        let credentials = directory.path("credentials")
        try FileManager.default.createDirectory(
            atPath: credentials, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let credential = credentials + "/app-db-key"
        try Data("alpha".utf8).write(to: URL(fileURLWithPath: credential))
        XCTAssertEqual(chmod(credential, 0o400), 0)
        let folder = directory.path("missing")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let providers: [(String, any KeyProvider)] = [
            ("slot", KeySlotKeyProvider(secret: .passphrase("alpha"))),
            ("reloadable", try ReloadableKeyProvider { KeySlotKeyProvider(secret: .passphrase("alpha")) }),
            (
                "credential",
                try SystemdCredentialKeyProvider(
                    credential: "app-db-key", usage: .keySlot(.passphrase),
                    environment: ["CREDENTIALS_DIRECTORY": credentials])
            ),
            (
                "reloadable credential",
                try ReloadableKeyProvider {
                    try SystemdCredentialKeyProvider(
                        credential: "app-db-key", usage: .keySlot(.passphrase),
                        environment: ["CREDENTIALS_DIRECTORY": credentials])
                }
            ),
        ]
        let watch = try CreationWatch(folder)
        for (what, provider) in providers {
            XCTAssertTrue(provider.requiresExistingDatabase, what)
            let path = folder + "/app.db"
            XCTAssertThrowsError(
                try FMDatabaseQueue(
                    path: path, configuration: FMDatabaseConfiguration(keyProvider: provider, logsErrors: false)), what
            ) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_CANTOPEN), "\(what): \($0)")
            }
            XCTAssertThrowsError(
                try FMDatabasePool(
                    path: path, configuration: FMDatabaseConfiguration(keyProvider: provider, logsErrors: false)), what
            ) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_CANTOPEN), "\(what): \($0)")
            }
            XCTAssertEqual(watch.created(), [], "\(what): no file was ever created")
        }
        XCTAssertFalse(try XCTUnwrap(StorageMode.encrypted.keyProvider).requiresExistingDatabase, "the default")
    }
}
