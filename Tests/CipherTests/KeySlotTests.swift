@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Key slots: a random data key wrapped per slot in `<db>-keyslots`. Most tests use a cheap PBKDF2
/// (`unsafePBKDF2SHA512`) so they run fast; `testDefaultSlotUsesScryptAndFloorsAreEnforced` uses the defaults.
final class KeySlotTests: FMDBCipherTestCase {
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)

    /// A slotted database with passphrase "alpha" (slot 1), passphrase "beta" (slot 2), a recovery key
    /// (slot 3), and one row.
    func makeSlotted(_ name: String = "slotted.db") throws -> (path: String, recovery: String) {
        let path = directory.path(name)
        try KeySlots.createDatabase(at: path, secret: .passphrase("alpha"), kdf: cheap)
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: cheap)
        let (slot, recovery) = try KeySlots.addRecoverySlot(to: path, unlockingWith: .passphrase("beta"))
        XCTAssertEqual(slot.id, 3)
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha")))
        try queue.inDatabase { db in
            try db.executeUpdate("create table t (a text)", values: nil)
            try db.executeUpdate("insert into t values ('slotted')", values: nil)
        }
        queue.close()
        return (path, recovery.formattedText)
    }

    func readRow(_ path: String, _ secret: KeySlotSecret) throws -> String? {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: KeySlotKeyProvider(secret: secret))
        return db.string(forQuery: "select a from t")
    }

    func assertFails(_ code: Int32, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as NSError).domain, "FMDatabase", file: file, line: line)
            XCTAssertEqual((error as NSError).code, Int(code), "\(error)", file: file, line: line)
        }
    }

    func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    // MARK: - Opening

    func testTwoPassphrasesAndARecoveryKeyOpenTheSameDatabaseInLibraryQueueAndPool() throws {
        let (path, recoveryText) = try makeSlotted()
        let secrets: [KeySlotSecret] = [.passphrase("alpha"), .passphrase("beta"), try .recoveryKey(recoveryText)]
        for secret in secrets {
            XCTAssertEqual(try readRow(path, secret), "slotted", "\(secret)")
            let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: secret))
            XCTAssertEqual(queue.inDatabase { db in db.string(forQuery: "select a from t") }, "slotted")
            queue.close()
            let pool = try FMDatabasePool(path: path, keyProvider: KeySlotKeyProvider(secret: secret))
            XCTAssertEqual(pool.inDatabase { db in db.string(forQuery: "select a from t") }, "slotted")
            pool.releaseAllDatabases()
        }
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .passphrase("gamma")) }
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .rawKey(Data(repeating: 7, count: 32))) }
    }

    func testAPoolOfEightCostsOneUnwrap() throws {
        let (path, _) = try makeSlotted()
        let provider = KeySlotKeyProvider(secret: .passphrase("beta"))
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        let opened = Locked(0)
        // Two blocks inside at once for certain: the pool opens a second connection.
        let together = Rendezvous(parties: 2)
        onThreads(8) { _ in
            pool.inDatabase { db in
                if db.string(forQuery: "select a from t") == "slotted" { opened.withLock { $0 += 1 } }
                XCTAssertTrue(together.arrive(), "two blocks at once")
            }
        }
        XCTAssertEqual(opened.withLock { $0 }, 8)
        XCTAssertGreaterThan(pool.countOfOpenDatabases, 1)
        XCTAssertEqual(provider.derivationCount, 1)
        pool.releaseAllDatabases()
    }

    func testRecoveryKeyIsTypeableAndTyposAreCaught() throws {
        let (path, recovery) = try makeSlotted()
        XCTAssertEqual(recovery.count, 44)
        XCTAssertEqual(recovery.split(separator: "-").count, 9)
        // Lower case, spaces instead of hyphens, O for 0 and l for 1: still the same key.
        let sloppy = recovery.lowercased().replacingOccurrences(of: "-", with: " ")
            .replacingOccurrences(of: "0", with: "o").replacingOccurrences(of: "1", with: "l")
        XCTAssertEqual(try readRow(path, .recoveryKey(sloppy)), "slotted")
        // One character changed: the check group catches it before any slot is tried.
        var characters = Array(recovery)
        characters[5] = characters[5] == "Z" ? "Y" : "Z"
        assertFails(SQLITE_MISUSE) { _ = try KeySlotSecret.recoveryKey(String(characters)) }
        assertFails(SQLITE_MISUSE) { _ = try KeySlotSecret.recoveryKey(String(recovery.dropLast(5))) }
    }

    // MARK: - Changing slots

    func testChangeTakesEffectAndLeavesDataPagesByteForByteUnchanged() throws {
        let (path, _) = try makeSlotted()
        let before = try bytes(path)
        let slotBefore = try bytes(KeySlots.slotFilePath(forDatabaseAt: path))
        let changed = try KeySlots.changeSlot(
            of: path, from: .passphrase("alpha"), to: .passphrase("alpha 2"), kdf: cheap)
        XCTAssertEqual(changed.id, 1)
        XCTAssertEqual(try bytes(path), before, "a passphrase change must not touch the database")
        XCTAssertNotEqual(try bytes(KeySlots.slotFilePath(forDatabaseAt: path)), slotBefore)
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .passphrase("alpha")) }
        XCTAssertEqual(try readRow(path, .passphrase("alpha 2")), "slotted")
        XCTAssertEqual(try readRow(path, .passphrase("beta")), "slotted")
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [1, 2, 3])
    }

    func testRemovingASlotLeavesTheOthersWorkingButNeverTheLast() throws {
        let (path, recovery) = try makeSlotted()
        try KeySlots.removeSlot(2, from: path, unlockingWith: .passphrase("alpha"))
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .passphrase("beta")) }
        XCTAssertEqual(try readRow(path, .passphrase("alpha")), "slotted")
        XCTAssertEqual(try readRow(path, .recoveryKey(recovery)), "slotted")
        assertFails(SQLITE_MISUSE) { try KeySlots.removeSlot(9, from: path, unlockingWith: .passphrase("alpha")) }
        try KeySlots.removeSlot(1, from: path, unlockingWith: .recoveryKey(recovery))
        assertFails(SQLITE_MISUSE) { try KeySlots.removeSlot(3, from: path, unlockingWith: .recoveryKey(recovery)) }
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.kind), [.recoveryKey])
        XCTAssertEqual(try readRow(path, .recoveryKey(recovery)), "slotted")
    }

    func testRawKeySlotAndListShowNoSecrets() throws {
        let (path, _) = try makeSlotted()
        let raw = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) })
        let info = try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .rawKey(raw))
        XCTAssertEqual(info.kind, .rawKey)
        XCTAssertEqual(info.kdf, "hmac-sha256")
        XCTAssertEqual(try readRow(path, .rawKey(raw)), "slotted")
        let listed = try KeySlots.list(forDatabaseAt: path)
        XCTAssertEqual(listed.map(\.kind), [.passphrase, .passphrase, .recoveryKey, .rawKey])
        XCTAssertEqual(listed[0].kdf, "pbkdf2-sha512 1000")
        // The data key is nowhere in the slot file, in hex or binary.
        let hexBytes = try KeySlots.withDataKeyHex(of: path, unlockingWith: .passphrase("beta")) { Data($0) }
        let slotFile = try bytes(KeySlots.slotFilePath(forDatabaseAt: path))
        XCTAssertNil(slotFile.range(of: hexBytes))
        XCTAssertNil(slotFile.range(of: try XCTUnwrap(Data(hex: String(decoding: hexBytes, as: UTF8.self)))))
    }

    func testDefaultSlotUsesScryptAndFloorsAreEnforced() throws {
        let path = directory.path("default.db")
        let info = try KeySlots.createDatabase(at: path, secret: .passphrase("strong"))
        XCTAssertEqual(info.kdf, "scrypt N=32768 r=8 p=1")
        XCTAssertEqual(info.kind, .passphrase)
        assertFails(SQLITE_MISUSE) {
            try KeySlots.addSlot(
                to: path, unlockingWith: .passphrase("strong"), newSecret: .passphrase("weak"),
                kdf: .pbkdf2SHA512(iterations: 63_999))
        }
        assertFails(SQLITE_MISUSE) {
            try KeySlots.addSlot(
                to: path, unlockingWith: .passphrase("strong"), newSecret: .passphrase("weak"), kdf: .scrypt(n: 1 << 13)
            )
        }
        let pbkdf2 = try KeySlots.addSlot(
            to: path, unlockingWith: .passphrase("strong"), newSecret: .passphrase("p"), kdf: .pbkdf2SHA512())
        XCTAssertEqual(pbkdf2.kdf, "pbkdf2-sha512 256000")
        XCTAssertNotNil(try readRowOrNil(path, .passphrase("p")))
        assertFails(SQLITE_MISUSE) {
            try KeySlots.createDatabase(at: self.directory.path("e.db"), secret: .passphrase(""))
        }
        let typed = RecoveryKeyCode.format(try secureRandomBytes(20)).withUnsafeBytes {
            String(decoding: $0, as: UTF8.self)
        }
        assertFails(SQLITE_MISUSE) {
            try KeySlots.createDatabase(at: self.directory.path("r.db"), secret: .recoveryKey(typed))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path("r.db")))
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createDatabase(at: path, secret: .passphrase("again"), kdf: self.cheap)
        }
    }

    /// Security review: the new database is made by the library (O_CREAT|O_EXCL|O_NOFOLLOW, 0600), so it
    /// is private whatever the umask, and a planted symbolic link (even dangling) is refused, not followed.
    func testCreateDatabaseIsPrivateAndNeverFollowsALink() throws {
        let old = umask(0o022)
        defer { umask(old) }
        let plain = directory.path("plain.db")
        try KeySlots.createDatabase(at: plain, secret: .passphrase("alpha"), kdf: cheap)
        for file in [plain, KeySlots.slotFilePath(forDatabaseAt: plain)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600, file)
        }
        XCTAssertEqual(try readRowOrNil(plain, .passphrase("alpha")), "0")

        let other = directory.path("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        let target = other + "/target.db"
        let planted = directory.path("planted.db")
        try FileManager.default.createSymbolicLink(atPath: planted, withDestinationPath: target)
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createDatabase(at: planted, secret: .passphrase("alpha"), kdf: self.cheap)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), "the link was not followed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: KeySlots.slotFilePath(forDatabaseAt: planted)))
        // A link to an existing empty file, and an empty file, are refused too and left as they were.
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data()))
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createDatabase(at: planted, secret: .passphrase("alpha"), kdf: self.cheap)
        }
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createDatabase(at: target, secret: .passphrase("alpha"), kdf: self.cheap)
        }
        XCTAssertEqual(try bytes(target), Data())
        // A link planted where the slot file goes is refused as well.
        let second = directory.path("second.db")
        try FileManager.default.createSymbolicLink(
            atPath: KeySlots.slotFilePath(forDatabaseAt: second), withDestinationPath: other + "/slots")
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createDatabase(at: second, secret: .passphrase("alpha"), kdf: self.cheap)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: second))
        XCTAssertFalse(FileManager.default.fileExists(atPath: other + "/slots"))
    }

    func readRowOrNil(_ path: String, _ secret: KeySlotSecret) throws -> String? {
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: KeySlotKeyProvider(secret: secret))
        return db.string(forQuery: "select count(*) from sqlite_master")
    }

    func testSlotFileIsPrivateAndNoTemporaryFileStays() throws {
        let (path, _) = try makeSlotted()
        let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: slotPath)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).sorted()
        XCTAssertEqual(names, ["slotted.db", "slotted.db-keyslots", "slotted.db-keyslots.lock"])
        // A stale temporary file from a killed writer is cleaned up by the next change.
        let stale = directory.path(".slotted.db-keyslots.tmp-stale")
        XCTAssertTrue(FileManager.default.createFile(atPath: stale, contents: Data("x".utf8)))
        try KeySlots.changeSlot(of: path, from: .passphrase("beta"), to: .passphrase("beta 2"), kdf: cheap)
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale))
    }

    // MARK: - Damaged, swapped, missing slot files

    func testTamperedSlotFileIsRefusedAndNothingIsWritten() throws {
        let (path, _) = try makeSlotted()
        let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
        let original = try bytes(slotPath)
        let database = try bytes(path)
        let text = String(decoding: original, as: UTF8.self)
        // Edits that keep the file well-formed: each must still be detected.
        let edits: [(String, String)] = [
            ("\"created\":", "\"created\":1"),  // a slot's creation time
            ("\"iterations\":1000", "\"iterations\":1001"),  // a slot's KDF parameters
            ("\"id\":3", "\"id\":4"),  // a slot's id
            ("\"kind\":\"recovery\"", "\"kind\":\"raw\""),
        ]
        var cases: [Data] = edits.map { Data(text.replacingOccurrences(of: $0.0, with: $0.1).utf8) }
        // Flipped bytes all over the file (every 7th byte).
        for offset in stride(from: 0, to: original.count, by: 7) {
            var flipped = original
            flipped[offset] ^= 0x01
            cases.append(flipped)
        }
        var refused = 0
        for damaged in cases where damaged != original {
            try damaged.write(to: URL(fileURLWithPath: slotPath))
            for secret: KeySlotSecret in [.passphrase("alpha"), .passphrase("beta")] {
                do {
                    _ = try readRow(path, secret)
                    // A flip inside another slot's wrapped key, or in whitespace JSON ignores, must still
                    // be caught by the file tag: opening must never succeed on an altered file.
                    XCTFail("an altered slot file opened the database")
                } catch let error as FMDatabaseError {
                    XCTAssertTrue([SQLITE_CORRUPT, SQLITE_NOTADB].contains(error.resultCode), "\(error)")
                    refused += 1
                }
                XCTAssertThrowsError(
                    try KeySlots.addSlot(to: path, unlockingWith: secret, newSecret: .passphrase("x"), kdf: cheap))
                XCTAssertEqual(try bytes(slotPath), damaged, "nothing written over a damaged slot file")
            }
        }
        XCTAssertGreaterThan(refused, 50)
        XCTAssertEqual(try bytes(path), database)
        try original.write(to: URL(fileURLWithPath: slotPath))
        XCTAssertEqual(try readRow(path, .passphrase("alpha")), "slotted")
    }

    /// Security review: a slot file's KDF parameters are checked against bounds before any arithmetic,
    /// allocation or key derivation, so a crafted file is a clear SQLITE_CORRUPT, never a trap (r·p
    /// overflowed UInt64 before the tag was checked) and never a giant allocation.
    func testSlotFileWithOutOfBoundsKDFParametersIsCorruptNotACrash() throws {
        let scryptPath = directory.path("scrypt.db")
        try KeySlots.createDatabase(at: scryptPath, secret: .passphrase("alpha"))
        let (pbkdf2Path, _) = try makeSlotted("pbkdf2.db")
        let edits: [(path: String, from: [String], to: [String])] = [
            (scryptPath, ["\"p\":1", "\"r\":8"], ["\"p\":2", "\"r\":9223372036854775808"]),  // r·p overflows
            (scryptPath, ["\"r\":8"], ["\"r\":18446744073709551615"]),
            (scryptPath, ["\"r\":8"], ["\"r\":0"]),
            (scryptPath, ["\"r\":8"], ["\"r\":65536"]),
            (scryptPath, ["\"p\":1", "\"r\":8"], ["\"p\":65535", "\"r\":65535"]),  // r·p >= 2^30
            (scryptPath, ["\"p\":1", "\"r\":8"], ["\"p\":1", "\"r\":4096"]),  // 2^44 bytes of memory
            (scryptPath, ["\"n\":32768"], ["\"n\":8192"]),  // below the floor
            (scryptPath, ["\"n\":32768"], ["\"n\":8388608"]),  // 2^23
            (scryptPath, ["\"n\":32768"], ["\"n\":32767"]),
            (scryptPath, ["\"n\":32768"], ["\"n\":0"]),
            (scryptPath, ["\"n\":32768"], ["\"n\":9223372036854775808"]),
            (scryptPath, ["\"n\":32768"], ["\"iterations\":1000,\"n\":32768"]),
            (scryptPath, ["\"name\":\"scrypt\""], ["\"name\":\"hmac-sha256\""]),
            (pbkdf2Path, ["\"iterations\":1000"], ["\"iterations\":0"]),
            (pbkdf2Path, ["\"iterations\":1000"], ["\"iterations\":-1"]),
            (pbkdf2Path, ["\"iterations\":1000"], ["\"iterations\":999"]),
            (pbkdf2Path, ["\"iterations\":1000"], ["\"iterations\":100000001"]),
            (pbkdf2Path, ["\"iterations\":1000"], ["\"iterations\":9223372036854775807"]),
            (pbkdf2Path, ["\"id\":3"], ["\"id\":9223372036854775807"]),
            (pbkdf2Path, ["\"generation\":1,\"slots\""], ["\"generation\":9223372036854775807,\"slots\""]),
        ]
        for (path, from, to) in edits {
            let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
            let original = try bytes(slotPath)
            var text = String(decoding: original, as: UTF8.self)
            for (old, new) in zip(from, to) {
                XCTAssertNotNil(text.range(of: old), "\(old) in the slot file")
                text = text.replacingOccurrences(of: old, with: new)
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: slotPath))
            assertFails(SQLITE_CORRUPT) { _ = try KeySlots.list(forDatabaseAt: path) }
            assertFails(SQLITE_CORRUPT) { _ = try self.readRow(path, .passphrase("alpha")) }
            assertFails(SQLITE_CORRUPT) {
                try KeySlots.addSlot(
                    to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("x"), kdf: self.cheap)
            }
            XCTAssertEqual(try bytes(slotPath), Data(text.utf8), "nothing written over it")
            try original.write(to: URL(fileURLWithPath: slotPath))
        }
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: scryptPath).map(\.kdf), ["scrypt N=32768 r=8 p=1"])
        // The same bounds when a slot is made: no trap on a caller's r·p either.
        for kdf in [
            KeySlotKDF.scrypt(r: 1 << 63, p: 2), .scrypt(n: 1 << 23), .scrypt(r: 1 << 16), .scrypt(n: 1 << 16, r: 1),
            .unsafePBKDF2SHA512(iterations: 999),
        ] {
            assertFails(SQLITE_MISUSE) {
                try KeySlots.addSlot(
                    to: pbkdf2Path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("x"), kdf: kdf)
            }
        }
    }

    func testTruncatedSlotFileIsRefused() throws {
        let (path, _) = try makeSlotted()
        let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
        let original = try bytes(slotPath)
        for length in [0, 1, 20, original.count / 2, original.count - 70, original.count - 1] {
            try original.prefix(length).write(to: URL(fileURLWithPath: slotPath))
            assertFails(SQLITE_CORRUPT) { _ = try self.readRow(path, .passphrase("alpha")) }
            assertFails(SQLITE_CORRUPT) { _ = try KeySlots.list(forDatabaseAt: path) }
            XCTAssertEqual(try bytes(slotPath), original.prefix(length))
        }
    }

    func testSlotFileSwappedFromAnotherDatabaseIsRefused() throws {
        let (first, _) = try makeSlotted("first.db")
        let (second, _) = try makeSlotted("second.db")
        let secondSlots = try bytes(KeySlots.slotFilePath(forDatabaseAt: second))
        try secondSlots.write(to: URL(fileURLWithPath: KeySlots.slotFilePath(forDatabaseAt: first)))
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(first, .passphrase("alpha")) }
        assertFails(SQLITE_NOTADB) {
            try KeySlots.addSlot(
                to: first, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("x"), kdf: self.cheap)
        }
        // Editing the recorded salt to this database's does not help: it is bound into every slot.
        let firstSalt = try KeySlots.databaseSalt(first).hexString
        let secondSalt = try KeySlots.databaseSalt(second).hexString
        let edited = String(decoding: secondSlots, as: UTF8.self).replacingOccurrences(of: secondSalt, with: firstSalt)
        try Data(edited.utf8).write(to: URL(fileURLWithPath: KeySlots.slotFilePath(forDatabaseAt: first)))
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(first, .passphrase("alpha")) }
    }

    func testMissingSlotFileAndMissingDatabaseAreClearErrors() throws {
        let (path, _) = try makeSlotted()
        try FileManager.default.removeItem(atPath: KeySlots.slotFilePath(forDatabaseAt: path))
        assertFails(SQLITE_CANTOPEN) { _ = try self.readRow(path, .passphrase("alpha")) }
        assertFails(SQLITE_CANTOPEN) { _ = try KeySlots.list(forDatabaseAt: path) }
        assertFails(SQLITE_CANTOPEN) { _ = try self.readRow(self.directory.path("nothing.db"), .passphrase("alpha")) }
        // A symbolic link nobody named is not followed.
        let elsewhere = directory.path("elsewhere")
        try Data("x".utf8).write(to: URL(fileURLWithPath: elsewhere))
        try FileManager.default.createSymbolicLink(
            atPath: KeySlots.slotFilePath(forDatabaseAt: path), withDestinationPath: elsewhere)
        assertFails(SQLITE_CANTOPEN) { _ = try self.readRow(path, .passphrase("alpha")) }
    }

    // MARK: - Data key

    func testExportedDataKeyOpensInTheSqlcipherShell() throws {
        let shell = try lineShell()
        let (path, recovery) = try makeSlotted()
        let text = try KeySlots.withDataKeyHex(of: path, unlockingWith: .recoveryKey(recovery)) {
            String(decoding: $0, as: UTF8.self)
        }
        XCTAssertEqual(text.count, 64)
        let result = try runSQLCipherShell(shell, path, "PRAGMA key = \"x'\(text)'\";\nSELECT a FROM t;\n")
        XCTAssertEqual(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "slotted", result.stderr)
    }

    func testRotatingTheDataKeyRekeysAndRewrapsEverySlot() throws {
        let (path, recovery) = try makeSlotted()
        let shell = try lineShell()
        let oldHex = try KeySlots.withDataKeyHex(of: path, unlockingWith: .passphrase("alpha")) {
            String(decoding: $0, as: UTF8.self)
        }
        let before = try bytes(path)
        // A slot no given secret opens: refused, nothing changed.
        assertFails(SQLITE_MISUSE) {
            try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("alpha"), .passphrase("beta")])
        }
        XCTAssertEqual(try bytes(path), before)
        try KeySlots.rotateDataKey(
            of: path, secrets: [.passphrase("alpha"), .passphrase("beta"), .recoveryKey(recovery)])
        XCTAssertNotEqual(try bytes(path), before)
        let newHex = try KeySlots.withDataKeyHex(of: path, unlockingWith: .passphrase("beta")) {
            String(decoding: $0, as: UTF8.self)
        }
        XCTAssertNotEqual(oldHex, newHex)
        for secret: KeySlotSecret in [.passphrase("alpha"), .passphrase("beta"), try .recoveryKey(recovery)] {
            XCTAssertEqual(try readRow(path, secret), "slotted")
        }
        let old = try runSQLCipherShell(shell, path, "PRAGMA key = \"x'\(oldHex)'\";\nSELECT a FROM t;\n")
        XCTAssertTrue(old.stderr.contains("not a database"), old.stderr)
        let new = try runSQLCipherShell(shell, path, "PRAGMA key = \"x'\(newHex)'\";\nSELECT a FROM t;\n")
        XCTAssertEqual(new.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "slotted", new.stderr)
        // Dropping the slots no given secret opens, explicitly.
        try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("beta")], droppingUnmatchedSlots: true)
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [2])
        XCTAssertEqual(try readRow(path, .passphrase("beta")), "slotted")
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .passphrase("alpha")) }
    }

    func testRotationUnderAnotherConnectionsLockFailsAndKeepsTheOldSlotFile() throws {
        let (path, recovery) = try makeSlotted()
        let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
        let slotsBefore = try bytes(slotPath)
        let holder = FMDatabase(path: path)
        XCTAssertTrue(holder.open())
        try holder.setKey(using: KeySlotKeyProvider(secret: .passphrase("alpha")))
        XCTAssertTrue(holder.beginImmediateTransaction())
        let secrets: [KeySlotSecret] = [.passphrase("alpha"), .passphrase("beta"), try .recoveryKey(recovery)]
        assertFails(SQLITE_BUSY) { try KeySlots.rotateDataKey(of: path, secrets: secrets) }
        XCTAssertTrue(holder.rollback())
        holder.close()
        XCTAssertEqual(try bytes(slotPath), slotsBefore, "the old slot file is back")
        XCTAssertEqual(try readRow(path, .passphrase("beta")), "slotted")
    }

    func testAPoolPicksUpADataKeyRotationMadeElsewhere() throws {
        let (path, recovery) = try makeSlotted()
        let provider = KeySlotKeyProvider(secret: .passphrase("beta"))
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        XCTAssertEqual(pool.inDatabase { db in db.string(forQuery: "select a from t") }, "slotted")
        pool.releaseAllDatabases()
        try KeySlots.rotateDataKey(
            of: path, secrets: [.passphrase("alpha"), .passphrase("beta"), .recoveryKey(recovery)])
        // New connections: the slot file changed, so the provider unwraps the new data key.
        XCTAssertEqual(pool.inDatabase { db in db.string(forQuery: "select a from t") }, "slotted")
        XCTAssertEqual(provider.derivationCount, 2)
        pool.releaseAllDatabases()
    }

    func testAPendingRotationOpensWithWhicheverKeyTheDatabaseIsUnder() throws {
        // The state a crash between the steps of a rotation leaves: a slot file with both generations.
        let (path, _) = try makeSlotted()
        let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
        let salt = try KeySlots.databaseSalt(path)
        let opened = try KeySlots.unlock(
            try KeySlotStorage.read(slotPath), secret: .passphrase("alpha"), slotID: nil,
            databaseSalt: salt, slotPath: slotPath)
        let oldKey = try opened.currentDataKey(databasePath: path)
        let newKey = try secureRandomBytes(32)
        var file = opened.file
        file.body.pendingGeneration = 2
        let keys = [1: oldKey, 2: newKey]
        let kek = try XCTUnwrap(file.unlock(with: .passphrase("alpha"))).kek
        file.body.slots = [try file.rewrap(file.body.slots[0], kek: kek, dataKeys: keys)]
        try KeySlotStorage.writeAtomically(try file.serialized(dataKeys: keys), to: slotPath)
        // Before the rekey: the old key.
        XCTAssertEqual(try readRow(path, .passphrase("alpha")), "slotted")
        // After the rekey: the new key.
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        db.isKeySlotRotation = true  // the rotation's own rekey: any other rekey of a slotted database is refused
        try db.setKey(using: RawKeyProvider(key: .raw(secure: oldKey, salt: nil)))
        try db.rekey(using: RawKeyProvider(key: .raw(secure: newKey, salt: nil)))
        db.close()
        XCTAssertEqual(try readRow(path, .passphrase("alpha")), "slotted")
        // The next change settles the file on the generation in force.
        try KeySlots.changeSlot(of: path, from: .passphrase("alpha"), to: .passphrase("alpha 3"), kdf: cheap)
        let settled = try KeySlotFile.parse(try bytes(slotPath)).file
        XCTAssertNil(settled.body.pendingGeneration)
        XCTAssertEqual(settled.body.generation, 2)
        XCTAssertEqual(try readRow(path, .passphrase("alpha 3")), "slotted")
    }

    /// The key slot example of FMDB.docc/KeySlotsAndRecoveryKeys.md, as written there (with the default,
    /// real-cost KDFs).
    func testReadmeExample() throws {
        let path = directory.path("readme.db")
        try KeySlots.createDatabase(at: path, secret: .passphrase("admin passphrase"))  // scrypt slot 1
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("admin passphrase"), newSecret: .passphrase("ops"))
        let (_, recovery) = try KeySlots.addRecoverySlot(to: path, unlockingWith: .passphrase("ops"))
        let typedRecoveryKey = recovery.formattedText
        let pool = try FMDatabasePool(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("ops")))
        try KeySlots.changeSlot(of: path, from: .passphrase("ops"), to: .passphrase("ops 2026"))  // ms, no rekey
        try KeySlots.removeSlot(1, from: path, unlockingWith: .recoveryKey(typedRecoveryKey))  // never the last
        try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("ops 2026"), .recoveryKey(typedRecoveryKey)])
        pool.releaseAllDatabases()
        // The pool's provider holds "ops", which no longer opens any slot: new connections fail.
        XCTAssertNil(pool.inDatabase { db in db.int(forQuery: "select count(*) from sqlite_master") })
        let renewed = try FMDatabasePool(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("ops 2026")))
        XCTAssertEqual(renewed.inDatabase { db in db.int(forQuery: "select count(*) from sqlite_master") }, 0)
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [2, 3])
    }

    // MARK: - systemd credentials

    func makeCredential(_ name: String, _ contents: Data, mode: Int) throws -> [String: String] {
        let credentials = directory.path("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        let file = credentials + "/" + name
        try contents.write(to: URL(fileURLWithPath: file))
        XCTAssertEqual(chmod(file, mode_t(mode)), 0)
        return ["CREDENTIALS_DIRECTORY": credentials]
    }

    func testSystemdCredentialUnlocksARawKeySlot() throws {
        let (path, _) = try makeSlotted()
        let raw = Data((0..<32).map { UInt8(200 - $0) })
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .rawKey(raw))
        let hex = raw.map { String(format: "%02x", $0) }.joined() + "\n"
        let environment = try makeCredential("app-db-key", Data(hex.utf8), mode: 0o400)
        let provider = try SystemdCredentialKeyProvider(
            credential: "app-db-key", usage: .keySlot(.rawKey), environment: environment)
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        XCTAssertEqual(pool.inDatabase { db in db.string(forQuery: "select a from t") }, "slotted")
        pool.releaseAllDatabases()
        // A passphrase slot through a credential too (0440 is what systemd uses for a group-owned one... not
        // readable by others, and here not by the group either).
        let passEnv = try makeCredential("app-pass", Data("beta\n".utf8), mode: 0o600)
        let passProvider = try SystemdCredentialKeyProvider(
            credential: "app-pass", usage: .keySlot(.passphrase), environment: passEnv)
        let queue = try FMDatabaseQueue(path: path, keyProvider: passProvider)
        XCTAssertEqual(queue.inDatabase { db in db.string(forQuery: "select a from t") }, "slotted")
        queue.close()
    }

    func testSystemdCredentialErrorsAreClear() throws {
        assertFails(SQLITE_CANTOPEN) {
            _ = try SystemdCredentialKeyProvider(credential: "k", usage: .rawKey, environment: [:])
        }
        let environment = try makeCredential("open-key", Data("secret".utf8), mode: 0o644)
        assertFails(SQLITE_CANTOPEN) {
            _ = try SystemdCredentialKeyProvider(credential: "absent", usage: .passphrase, environment: environment)
        }
        assertFails(SQLITE_PERM) {
            _ = try SystemdCredentialKeyProvider(credential: "open-key", usage: .passphrase, environment: environment)
        }
        _ = try makeCredential("group-key", Data("secret".utf8), mode: 0o640)
        assertFails(SQLITE_PERM) {
            _ = try SystemdCredentialKeyProvider(credential: "group-key", usage: .passphrase, environment: environment)
        }
        _ = try makeCredential("empty", Data(), mode: 0o400)
        assertFails(SQLITE_MISUSE) {
            _ = try SystemdCredentialKeyProvider(credential: "empty", usage: .passphrase, environment: environment)
        }
        assertFails(SQLITE_MISUSE) {
            _ = try SystemdCredentialKeyProvider(
                credential: "../open-key", usage: .passphrase, environment: environment)
        }
        _ = try makeCredential("short-raw", Data("abcd".utf8), mode: 0o400)
        assertFails(SQLITE_MISUSE) {
            _ = try SystemdCredentialKeyProvider(credential: "short-raw", usage: .rawKey, environment: environment)
        }
        let dir = try XCTUnwrap(environment["CREDENTIALS_DIRECTORY"])
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/short-raw")
        assertFails(SQLITE_CANTOPEN) {
            _ = try SystemdCredentialKeyProvider(credential: "link", usage: .passphrase, environment: environment)
        }
        let material = try SystemdCredentialKeyProvider.read(credential: "short-raw", environment: environment)
        XCTAssertEqual(material.count, 4)
    }

    /// Security review: a credential name is sometimes the secret itself (`--key-credential "$SECRET"`),
    /// so no error repeats it (nor the path made from it).
    func testSystemdCredentialErrorsNeverRepeatTheName() throws {
        let environment = try makeCredential("placeholder", Data("x".utf8), mode: 0o400)
        let dir = try XCTUnwrap(environment["CREDENTIALS_DIRECTORY"])
        let secretLooking = [
            "S3cr3t+Pass/word==", "S3cr3tPassw0rd", "S3cr3tOpen", "S3cr3tEmpty", "S3cr3tDir", "S3cr3tLink", "S3cr3tBig",
        ]
        _ = try makeCredential("S3cr3tOpen", Data("secret".utf8), mode: 0o644)
        _ = try makeCredential("S3cr3tEmpty", Data(), mode: 0o400)
        _ = try makeCredential("S3cr3tBig", Data(count: SystemdCredentialKeyProvider.maximumSize + 1), mode: 0o400)
        try FileManager.default.createDirectory(atPath: dir + "/S3cr3tDir", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(
            atPath: dir + "/S3cr3tLink", withDestinationPath: dir + "/placeholder")
        var failures = 0
        for name in secretLooking {
            for env in [environment, [:]] {
                XCTAssertThrowsError(try SystemdCredentialKeyProvider.read(credential: name, environment: env), name) {
                    error in
                    let ns = error as NSError
                    let shown = "\(error) \(ns.localizedDescription) \(ns.userInfo)"
                    XCTAssertEqual(ns.domain, "FMDatabase")
                    XCTAssertFalse(shown.contains(name), shown)
                    XCTAssertFalse(shown.contains("S3cr3t"), shown)
                    failures += 1
                }
            }
        }
        XCTAssertEqual(failures, 2 * secretLooking.count)
    }
}
