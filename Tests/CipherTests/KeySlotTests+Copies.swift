@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Copies that keep their key slots (`KeySlots.copySlotFile`, `KeySlots.createSlotFile`, and a
/// `KeySlotKeyProvider` asked to create a new database under its slot file's identity).
extension KeySlotTests {
    func salt(_ path: String) throws -> Data { try bytes(path).prefix(16) }

    /// Exports `source` into a new `destination` through `provider` (the library way to copy a slotted
    /// database), with `settings` for the copy.
    func exportThroughSlots(
        _ source: String, to destination: String, provider: KeySlotKeyProvider,
        settings: CipherSettings = CipherSettings()
    ) throws {
        let db = FMDatabase(path: source)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: provider)
        try db.attachDatabase(
            atPath: destination, schema: "copy", keyProvider: provider.creatingDatabase(at: destination),
            settings: settings)
        try db.exportContents(to: "copy")
        try db.detachDatabase(schema: "copy")
    }

    func testACopyKeepsTheSaltAndTheSourcesSlotFileOpensIt() throws {
        let (source, recovery) = try makeSlotted()
        let sourceSlots = KeySlots.slotFilePath(forDatabaseAt: source)
        let before = try bytes(source)
        let slotsBefore = try bytes(sourceSlots)
        let copy = directory.path("copy.db")
        let copySlots = KeySlots.slotFilePath(forDatabaseAt: copy)
        try KeySlots.copySlotFile(from: source, to: copy)
        let provider = KeySlotKeyProvider(secret: .passphrase("beta"))
        try exportThroughSlots(source, to: copy, provider: provider, settings: CipherSettings(pageSize: 4096))
        // One key derivation: the source's unwrap serves the copy (same slot file, same salt).
        XCTAssertEqual(provider.derivationCount, 1)
        XCTAssertEqual(try salt(copy), try salt(source))
        XCTAssertNotEqual(try bytes(copy), before, "a real copy (other page size), not the same bytes")
        XCTAssertEqual(try bytes(copySlots), slotsBefore)
        XCTAssertEqual(mode(copySlots), 0o600)
        XCTAssertEqual(try bytes(source), before)
        XCTAssertEqual(try bytes(sourceSlots), slotsBefore)
        for secret in [KeySlotSecret.passphrase("alpha"), .passphrase("beta"), try .recoveryKey(recovery)] {
            let db = FMDatabase(path: copy)
            XCTAssertTrue(db.open())
            try db.setKey(using: KeySlotKeyProvider(secret: secret), settings: CipherSettings(pageSize: 4096))
            XCTAssertEqual(db.string(forQuery: "select a from t"), "slotted", "\(secret)")
            db.close()
        }
        let hex = { (path: String) in
            try KeySlots.withDataKeyHex(of: path, unlockingWith: .passphrase("alpha")) {
                String(decoding: $0, as: UTF8.self)
            }
        }
        XCTAssertEqual(try hex(copy), try hex(source))
        // The copy is a database of its own: changing its slots leaves the source's alone.
        try KeySlots.changeSlot(of: copy, from: .passphrase("alpha"), to: .passphrase("alpha 2"), kdf: cheap)
        XCTAssertEqual(try readRow(source, .passphrase("alpha")), "slotted")
        XCTAssertEqual(try bytes(sourceSlots), slotsBefore)
    }

    /// The copy example of FMDB.docc/KeySlotsAndRecoveryKeys.md, as written there (its paths in the test's directory).
    func testCopyExampleOfTheKeySlotsArticle() throws {
        let (app, _) = try makeSlotted("app.db")
        try KeySlots.addSlot(to: app, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("ops"), kdf: cheap)
        let copyPath = directory.path("copy.db")
        try KeySlots.copySlotFile(from: app, to: copyPath)
        let provider = KeySlotKeyProvider(secret: .passphrase("ops"))  // one key derivation for the whole copy
        let db = FMDatabase(path: app)
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: provider)
        try db.attachDatabase(
            atPath: copyPath, schema: "copy", keyProvider: provider.creatingDatabase(at: copyPath),
            settings: CipherSettings(pageSize: 4096))
        try db.exportContents(to: "copy")
        try db.detachDatabase(schema: "copy")
        db.close()
        XCTAssertEqual(provider.derivationCount, 1)
        let copy = FMDatabase(path: copyPath)
        XCTAssertTrue(copy.open())
        defer { copy.close() }
        try copy.setKey(
            using: KeySlotKeyProvider(secret: .passphrase("beta")), settings: CipherSettings(pageSize: 4096))
        XCTAssertEqual(copy.string(forQuery: "select a from t"), "slotted")
    }

    func testCopySlotFileRefusesAnythingAtTheDestinationAndAForeignSlotFile() throws {
        let (source, _) = try makeSlotted()
        let copy = directory.path("copy.db")
        let copySlots = KeySlots.slotFilePath(forDatabaseAt: copy)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: copySlots))
        assertFails(SQLITE_CANTOPEN) { try KeySlots.copySlotFile(from: source, to: copy) }
        XCTAssertEqual(try bytes(copySlots), Data("mine".utf8))
        // A dangling symbolic link is "something there": refused, never followed.
        try FileManager.default.removeItem(atPath: copySlots)
        let target = directory.path("target")
        try FileManager.default.createSymbolicLink(atPath: copySlots, withDestinationPath: target)
        assertFails(SQLITE_CANTOPEN) { try KeySlots.copySlotFile(from: source, to: copy) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.contains(".tmp-") }, [])
        // The source's slot file must be the source's: one swapped from another database is refused.
        let (other, _) = try makeSlotted("other.db")
        try FileManager.default.removeItem(atPath: copySlots)
        try FileManager.default.removeItem(atPath: KeySlots.slotFilePath(forDatabaseAt: source))
        try FileManager.default.copyItem(
            atPath: KeySlots.slotFilePath(forDatabaseAt: other), toPath: KeySlots.slotFilePath(forDatabaseAt: source))
        assertFails(SQLITE_NOTADB) { try KeySlots.copySlotFile(from: source, to: copy) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: copySlots))
    }

    /// The example of the key slots article, "Putting an existing database under key slots": a single-key
    /// database copied under a new slot file, the old passphrase kept as a slot; no file holds the row in clear.
    func testASingleKeyDatabaseGoesUnderNewSlotsThroughACopy() throws {
        let source = directory.path("app.db")
        let db = FMDatabase(path: source)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("old passphrase"))
        try db.executeUpdate("create table t (a text)", values: nil)
        try db.executeUpdate("insert into t values ('SECRET-ROW')", values: nil)
        db.close()
        let target = directory.path("slotted.db")
        var copy = FMDatabaseCopy(
            from: source, keyProvider: PassphraseKeyProvider("old passphrase"), to: target,
            destinationKeyProvider: KeySlotKeyProvider(secret: .passphrase("ops")))
        copy.slotFile = .new(.passphrase("ops"), kdf: cheap, addingRecoveryKey: true)
        let report = try copy.run()
        let recovery = try XCTUnwrap(report.recoveryKey).formattedText
        try KeySlots.addSlot(
            to: target, unlockingWith: .passphrase("ops"), newSecret: .passphrase("old passphrase"), kdf: cheap)

        XCTAssertEqual(try readRow(target, .passphrase("ops")), "SECRET-ROW")
        XCTAssertEqual(try readRow(target, .recoveryKey(recovery)), "SECRET-ROW")
        XCTAssertEqual(try readRow(target, .passphrase("old passphrase")), "SECRET-ROW", "kept as a slot")
        XCTAssertNotEqual(try salt(target), try salt(source), "a new identity: the source's key does not open it")
        let direct = FMDatabase(path: target)
        direct.logsErrors = false
        XCTAssertTrue(direct.open())
        XCTAssertThrowsError(
            try direct.setKey(using: PassphraseKeyProvider("old passphrase")), "the old key no longer opens it directly"
        ) { XCTAssertEqual(($0 as NSError).code, Int(SQLITE_NOTADB)) }
        direct.close()
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path) {
            XCTAssertNil(try bytes(directory.path(name)).range(of: Data("SECRET-ROW".utf8)), "\(name) in clear")
        }
    }

    func testCreateSlotFileMakesASlottedDatabaseFromAPlaintextOne() throws {
        let plain = directory.path("plain.db")
        let db = FMDatabase(path: plain)
        XCTAssertTrue(db.open())
        try db.executeUpdate("create table t (a text)", values: nil)
        try db.executeUpdate("insert into t values ('from plaintext')", values: nil)
        let target = directory.path("enc.db")
        let made = try KeySlots.createSlotFile(
            forNewDatabaseAt: target, secret: .passphrase("alpha"), kdf: cheap, addingRecoveryKey: true)
        XCTAssertEqual(made.slots.map(\.id), [1, 2])
        XCTAssertEqual(made.slots.map(\.kind), [.passphrase, .recoveryKey])
        let recovery = try XCTUnwrap(made.recoveryKey).formattedText
        XCTAssertEqual(mode(KeySlots.slotFilePath(forDatabaseAt: target)), 0o600)
        try db.attachDatabase(
            atPath: target, schema: "enc",
            keyProvider: KeySlotKeyProvider(secret: .recoveryKey(recovery)).creatingDatabase(at: target))
        try db.exportContents(to: "enc")
        try db.detachDatabase(schema: "enc")
        db.close()
        XCTAssertEqual(try readRow(target, .passphrase("alpha")), "from plaintext")
        XCTAssertEqual(try readRow(target, .recoveryKey(recovery)), "from plaintext")
        XCTAssertEqual(
            try KeySlots.databaseSalt(target).hexString,
            try KeySlotFile.parse(try bytes(KeySlots.slotFilePath(forDatabaseAt: target))).file.body.databaseSalt)
        // Never over a database, nor over a slot file.
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createSlotFile(forNewDatabaseAt: target, secret: .passphrase("x"), kdf: self.cheap)
        }
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createSlotFile(forNewDatabaseAt: plain, secret: .passphrase("x"), kdf: self.cheap)
        }
        let second = directory.path("second.db")
        try Data("x".utf8).write(to: URL(fileURLWithPath: KeySlots.slotFilePath(forDatabaseAt: second)))
        assertFails(SQLITE_CANTOPEN) {
            try KeySlots.createSlotFile(forNewDatabaseAt: second, secret: .passphrase("x"), kdf: self.cheap)
        }
        assertFails(SQLITE_MISUSE) {
            try KeySlots.createSlotFile(
                forNewDatabaseAt: self.directory.path("third.db"), secret: .recoveryKey(recovery))
        }
        // A plaintext file beside a slot file does not take its identity.
        try FileManager.default.copyItem(
            atPath: KeySlots.slotFilePath(forDatabaseAt: target), toPath: KeySlots.slotFilePath(forDatabaseAt: plain))
        assertFails(SQLITE_CANTOPEN) { _ = try self.readRow(plain, .passphrase("alpha")) }
    }

    /// Mallory has her own slot in shared.db and copies its slot file beside victim.db, which does not exist
    /// yet (or is an empty file). The victim's own secret also opens a slot of shared.db. Opening or
    /// attaching victim.db with a default provider must not create it under shared.db's identity (which
    /// Mallory's secret would open): SQLITE_CANTOPEN, and nothing is written. Only a provider asked to create
    /// that very path (`creatingDatabase(at:)`, what the copies use) adopts the slot file beside it.
    func testAPlantedSlotFileBesideAMissingOrEmptyDatabaseIsNotAdopted() throws {
        let shared = directory.path("shared.db")
        try KeySlots.createDatabase(at: shared, secret: .passphrase("mallory"), kdf: cheap)
        try KeySlots.addSlot(
            to: shared, unlockingWith: .passphrase("mallory"), newSecret: .passphrase("victim"), kdf: cheap)
        let victim = directory.path("victim.db")
        try FileManager.default.copyItem(
            atPath: KeySlots.slotFilePath(forDatabaseAt: shared),
            toPath: KeySlots.slotFilePath(forDatabaseAt: victim))
        // Missing: open() makes the empty file; keying it is refused.
        let db = FMDatabase(path: victim)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        assertFails(SQLITE_CANTOPEN) { try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("victim"))) }
        db.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: victim), "nothing left behind")
        // Empty, through a queue and a pool, and as an attached database.
        XCTAssertTrue(FileManager.default.createFile(atPath: victim, contents: nil))
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: victim, keyProvider: KeySlotKeyProvider(secret: .passphrase("victim"))))
        XCTAssertThrowsError(
            try FMDatabasePool(path: victim, keyProvider: KeySlotKeyProvider(secret: .passphrase("victim"))))
        let main = FMDatabase(path: directory.path("main.db"))
        main.logsErrors = false
        XCTAssertTrue(main.open())
        assertFails(SQLITE_CANTOPEN) {
            try main.attachDatabase(
                atPath: victim, schema: "v", keyProvider: KeySlotKeyProvider(secret: .passphrase("victim")))
        }
        XCTAssertEqual(try bytes(victim).count, 0, "nothing written")
        // A provider asked to create another path does not adopt this one either.
        let elsewhere = KeySlotKeyProvider(secret: .passphrase("victim")).creatingDatabase(
            at: directory.path("other.db"))
        assertFails(SQLITE_CANTOPEN) { try main.attachDatabase(atPath: victim, schema: "v", keyProvider: elsewhere) }
        // Asked for this path (a copy being made): created under the slot file's identity.
        let asked = KeySlotKeyProvider(secret: .passphrase("victim")).creatingDatabase(at: victim)
        try main.attachDatabase(atPath: victim, schema: "v", keyProvider: asked)
        try main.executeUpdate("create table v.s (x)", values: nil)
        try main.detachDatabase(schema: "v")
        main.close()
        XCTAssertEqual(try salt(victim), try salt(shared))
        XCTAssertEqual(
            try readRowOrNil(victim, .passphrase("mallory")), "1", "the identity asked for, with every slot of it")
    }
}
