import FMDB
import Foundation
import TestSupport
import XCTest

/// `FMDatabaseCopy`: every copy is verified, private (0600, no planted link followed), atomic (nothing left
/// behind on a failure) and carries the slot file; a migration in place replaces SRC only with a verified copy.
final class DatabaseCopyTests: FMDBCipherTestCase {
    let key = try? RawKeyProvider(key: Data(repeating: 0x5A, count: 32))
    let otherKey = try? RawKeyProvider(key: Data(repeating: 0xC3, count: 32))

    /// Entries of the test directory other than `kept`.
    func leftovers(keeping kept: Set<String>) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? []).filter { !kept.contains($0) }
    }

    func makePlaintext(_ name: String = "plain.db", rows: Int = 20) throws -> String {
        let file = path(name)
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.executeUpdate("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", values: nil)
        for i in 0..<rows { try db.executeUpdate("INSERT INTO t (v) VALUES (?)", values: ["row \(i)"]) }
        return file
    }

    func rows(_ file: String, _ provider: (any KeyProvider)?, settings: CipherSettings = CipherSettings()) throws
        -> Int
    {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open() else { throw db.lastError() }
        defer { db.close() }
        if let provider { try db.setKey(using: provider, settings: settings) }
        return Int(db.int(forQuery: "SELECT count(*) FROM t"))
    }

    func testEncryptAndDecryptMakeVerifiedPrivateFilesUnderUmask022() throws {
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        let old = umask(0o022)
        defer { umask(old) }
        let report = try FMDatabaseCopy.encrypt(plain, to: path("enc.db"), keyProvider: key)
        XCTAssertEqual(mode(path("enc.db")), 0o600, "0600 whatever the umask")
        XCTAssertEqual(try rows(path("enc.db"), key), 20)
        XCTAssertGreaterThan(report.sourceBytes, 0)
        let header = try Data(contentsOf: URL(fileURLWithPath: path("enc.db"))).prefix(16)
        XCTAssertNotEqual(header, Data("SQLite format 3\u{0}".utf8), "encrypted: no plaintext header")
        try FMDatabaseCopy.decrypt(path("enc.db"), keyProvider: key, to: path("back.db"))
        XCTAssertEqual(mode(path("back.db")), 0o600)
        XCTAssertEqual(try rows(path("back.db"), nil), 20)
        XCTAssertEqual(leftovers(keeping: ["plain.db", "enc.db", "back.db"]), [], "no private directory left")
    }

    func testExistingDestAndAPlantedSymlinkAtDestAreRefusedAndNeverFollowed() throws {
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        let victim = path("victim")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victim))
        for planted in ["link.db", "dangling.db"] {
            let target = planted == "link.db" ? victim : path("nowhere")
            try FileManager.default.createSymbolicLink(atPath: path(planted), withDestinationPath: target)
            XCTAssertThrowsError(try FMDatabaseCopy.encrypt(plain, to: path(planted), keyProvider: key)) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .destinationExists, "\(error)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), Data("keep me".utf8))
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("nowhere")), "a dangling link is not followed")
        }
        // Replacing replaces the link itself, never what it points to.
        try FMDatabaseCopy.encrypt(plain, to: path("link.db"), keyProvider: key, replacingExisting: true)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), Data("keep me".utf8))
        XCTAssertEqual(try rows(path("link.db"), key), 20)
        XCTAssertEqual(mode(path("link.db")), 0o600, "a file now, not a link")
    }

    func testASymlinkPlantedAtTheTemporaryNameIsRefusedAndLeavesNothing() throws {
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        let victim = path("victim")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victim))
        var copy = FMDatabaseCopy(from: plain, to: path("enc.db"), destinationKeyProvider: key)
        copy.onStage = { stage in
            // The copy's file is created right after its private directory: a link planted there first.
            if case .stagingDirectory(let folder?) = stage {
                let planted: Void? = try? FileManager.default.createSymbolicLink(
                    atPath: folder + "/new.db", withDestinationPath: victim)
                XCTAssertNotNil(planted)
            }
        }
        XCTAssertThrowsError(try copy.run()) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .cannotCreate, "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: victim)), Data("keep me".utf8))
        XCTAssertEqual(leftovers(keeping: ["plain.db", "victim"]), [], "no DEST, no private directory")
    }

    /// A copy that fails after its private directory was made, and whose clean-up cannot remove that directory
    /// (here it holds a file the clean-up does not know), says in its error where the directory is; the error
    /// keeps its code and kind. A failure whose clean-up succeeds says nothing of it.
    func testAFailedCopyWhoseDirectoryStaysNamesItInItsError() throws {
        let key = try XCTUnwrap(key)
        let notADatabase = path("text.db")
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: notADatabase))
        var clean = FMDatabaseCopy(from: notADatabase, keyProvider: key, to: path("clean.db"))
        var cleanDirectory: String?
        clean.onStage = { if case .stagingDirectory(let folder?) = $0 { cleanDirectory = folder } }
        XCTAssertThrowsError(try clean.run()) { error in
            let message = (error as? FMDatabaseError)?.message ?? ""
            XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_NOTADB, "\(error)")
            XCTAssertFalse(message.contains("private directory"), message)
        }
        XCTAssertNotNil(cleanDirectory, "the failure came after the private directory was made")

        var copy = FMDatabaseCopy(from: notADatabase, keyProvider: key, to: path("out.db"))
        var privateDirectory: String?
        copy.onStage = { stage in
            if case .stagingDirectory(let folder?) = stage {
                privateDirectory = folder
                let planted: Void? = try? Data("stray".utf8).write(to: URL(fileURLWithPath: folder + "/stray"))
                XCTAssertNotNil(planted)
            }
        }
        XCTAssertThrowsError(try copy.run()) { error in
            let failure = error as? FMDatabaseError
            XCTAssertEqual(failure?.resultCode, SQLITE_NOTADB, "the cause's code is kept: \(error)")
            XCTAssertTrue(failure?.message.contains(privateDirectory ?? "?") == true, "\(error)")
        }
        let left = try XCTUnwrap(privateDirectory)
        XCTAssertTrue(FileManager.default.fileExists(atPath: left + "/stray"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("out.db")), "no DEST")
    }

    func testAVerificationFailureLeavesNothing() throws {
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        try FMDatabaseCopy.encrypt(plain, to: path("enc.db"), keyProvider: key)
        var copy = FMDatabaseCopy(from: path("enc.db"), keyProvider: key, to: path("out.db"))
        var stages: [FMDatabaseCopy.Stage] = []
        var temporary: String?
        copy.onStage = { stage in
            stages.append(stage)
            if case .copying(let file) = stage { temporary = file }
            // The copy loses a row between the export and its verification.
            if case .verifying = stage, let temporary {
                let db = FMDatabase(path: temporary)
                XCTAssertTrue(db.open())
                XCTAssertTrue(db.executeUpdate("DELETE FROM t WHERE id = 1"))
                db.close()
            }
        }
        XCTAssertThrowsError(try copy.run()) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .verificationFailed, "\(error)")
            XCTAssertEqual((error as NSError).code, Int(SQLITE_CORRUPT))
        }
        XCTAssertFalse(stages.contains(.publishing), "nothing published")
        XCTAssertEqual(leftovers(keeping: ["plain.db", "enc.db"]), [], "no DEST, no private directory: \(stages)")
    }

    func testADamagedSourceIsRefused() throws {
        let plain = try makePlaintext(rows: 400)
        // Garbage over the second page (a b-tree page) of the plaintext source: it fails, nothing is copied.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: plain))
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xFF, count: 4096))
        try handle.close()
        XCTAssertThrowsError(try FMDatabaseCopy.encrypt(plain, to: path("enc.db"), keyProvider: XCTUnwrap(key))) {
            error in
            let error = error as? FMDatabaseError
            XCTAssertTrue(
                error?.copyFailure == .sourceDamaged || error?.resultCode == SQLITE_CORRUPT,
                "\(String(describing: error))")
        }
        XCTAssertEqual(leftovers(keeping: ["plain.db"]), [])
    }

    func testTheSlotFileGoesWithTheCopy() throws {
        let secret = try KeySlotSecret.rawKey(Data(repeating: 7, count: 32))
        let source = path("slotted.db")
        try KeySlots.createDatabase(at: source, secret: secret)
        let provider = KeySlotKeyProvider(secret: secret)
        do {
            let db = FMDatabase(path: source)
            XCTAssertTrue(db.open())
            try db.setKey(using: provider)
            try db.executeUpdate("CREATE TABLE t (v)", values: nil)
            try db.executeUpdate("INSERT INTO t VALUES (1), (2)", values: nil)
            db.close()
        }
        try FMDatabaseCopy.backup(source, keyProvider: provider, to: path("backup.db"))
        let slots = KeySlots.slotFilePath(forDatabaseAt: path("backup.db"))
        XCTAssertEqual(
            FileManager.default.contents(atPath: slots),
            FileManager.default.contents(atPath: KeySlots.slotFilePath(forDatabaseAt: source)), "byte for byte")
        XCTAssertEqual(mode(slots), 0o600)
        XCTAssertEqual(try rows(path("backup.db"), KeySlotKeyProvider(secret: secret)), 2)
        // A copy without slots over a slotted DEST removes its slot file, and says so.
        let report = try FMDatabaseCopy.decrypt(
            source, keyProvider: provider, to: path("backup.db"), replacingExisting: true)
        XCTAssertTrue(report.removedDestinationSlotFile)
        XCTAssertFalse(FileManager.default.fileExists(atPath: slots))
    }

    func testAMigrationInPlaceReplacesSRCOnlyWithAVerifiedCopy() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { throw XCTSkip("migration needs SQLCipher 4 linked") }
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        let v3 = path("v3.db")
        try FMDatabaseCopy.encrypt(plain, to: v3, keyProvider: key, settings: CipherSettings(format: .v3))
        let before = try Data(contentsOf: URL(fileURLWithPath: v3))
        // A copy that does not verify leaves SRC byte for byte as it was, and nothing beside it.
        var temporary: String?
        var tampered = false
        XCTAssertThrowsError(
            try FMDatabaseCopy.migrateInPlace(v3, keyProvider: key) { stage in
                if case .copying(let file) = stage { temporary = file }
                // The copy loses a row between the export and its verification.
                if case .verifying = stage, let temporary {
                    let db = FMDatabase(path: temporary)
                    XCTAssertTrue(db.open())
                    XCTAssertNotNil(try? db.setKey(using: key, settings: CipherSettings(format: .v4)))
                    tampered = db.executeUpdate("DELETE FROM t WHERE id = 1")
                    db.close()
                }
            }
        ) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .verificationFailed, "\(error)")
        }
        XCTAssertTrue(tampered)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: v3)), before, "SRC as it was")
        XCTAssertEqual(leftovers(keeping: ["plain.db", "v3.db"]), [])
        // Then a clean migration: SRC is the SQLCipher 4 copy, same key, same rows; a second one does nothing.
        let report = try XCTUnwrap(try FMDatabaseCopy.migrateInPlace(v3, keyProvider: key))
        XCTAssertEqual(report.sourceFormat, .v3)
        XCTAssertEqual(try rows(v3, key), 20)
        let db = FMDatabase(path: v3)
        XCTAssertTrue(db.open())
        try db.setKey(using: key)
        XCTAssertEqual(db.cipherFormat, .v4)
        db.close()
        XCTAssertNil(try FMDatabaseCopy.migrateInPlace(v3, keyProvider: key), "already SQLCipher 4")
        XCTAssertEqual(leftovers(keeping: ["plain.db", "v3.db"]), [])
    }

    func testDestMustDifferFromSource() throws {
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        try FMDatabaseCopy.encrypt(plain, to: path("enc.db"), keyProvider: key)
        XCTAssertThrowsError(
            try FMDatabaseCopy.export(
                path("enc.db"), keyProvider: key, to: path("enc.db"), destinationKeyProvider: XCTUnwrap(otherKey),
                replacingExisting: true)
        ) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .sameFile, "\(error)")
        }
        XCTAssertEqual(try rows(path("enc.db"), key), 20)
    }

    // FMDB.docc/SafeCopies.md: the article's example, as written.
    func testSafeCopiesArticleExample() throws {
        let plainPath = try makePlaintext()
        let appPath = path("app.db")
        let backupPath = path("app.db.bak")
        var refused: String?

        let key = PassphraseKeyProvider("correct horse battery staple")

        // A plaintext database into a new encrypted file.
        try FMDatabaseCopy.encrypt(plainPath, to: appPath, keyProvider: key)

        // A verified backup before a key change, then the safe rekey.
        try FMDatabaseCopy.backup(appPath, keyProvider: key, to: backupPath)
        let db = FMDatabase(path: appPath)
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: key)
        _ = try db.rekeySafely(using: PassphraseKeyProvider("a new passphrase"))
        db.close()

        // What the copy itself refused is typed; everything else carries SQLite's code.
        do {
            try FMDatabaseCopy.encrypt(plainPath, to: appPath, keyProvider: key)
        } catch let error as FMDatabaseError where error.copyFailure == .destinationExists {
            refused = error.message
        }

        XCTAssertNotNil(refused, "DEST exists: refused")
        XCTAssertEqual(try rows(backupPath, key), 20, "the backup opens with the old key")
        XCTAssertEqual(try rows(appPath, PassphraseKeyProvider("a new passphrase")), 20)
    }

    func testRekeyWithBackupLeavesTheOldKeyOnTheBackupAndTheNewOneOnTheDatabase() throws {
        let key = try XCTUnwrap(key)
        let newKey = try XCTUnwrap(otherKey)
        let plain = try makePlaintext()
        try FMDatabaseCopy.encrypt(plain, to: path("app.db"), keyProvider: key)
        let outcome = try FMDatabaseCopy.rekeyWithBackup(
            path("app.db"), keyProvider: key, to: newKey, backup: path("app.db.bak"))
        XCTAssertEqual(outcome, .done)
        XCTAssertEqual(try rows(path("app.db"), newKey), 20)
        XCTAssertEqual(try rows(path("app.db.bak"), key), 20)
        XCTAssertEqual(mode(path("app.db.bak")), 0o600)
        // A backup that cannot be written (something is there) stops before the rekey.
        XCTAssertThrowsError(
            try FMDatabaseCopy.rekeyWithBackup(path("app.db"), keyProvider: newKey, to: key, backup: path("app.db.bak"))
        ) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .destinationExists, "\(error)")
        }
        XCTAssertEqual(try rows(path("app.db"), newKey), 20, "not rekeyed")
    }

    /// The hooks of a rekey with a backup, in order: the backup's stages, the backup's report once it is in place
    /// (the rekey not started: the database still opens with the old key), then the database's format right
    /// before the rekey. A backup that fails calls neither of the last two.
    func testRekeyWithBackupTellsTheBackupsStagesThenItsReportThenTheRekeysStart() throws {
        let key = try XCTUnwrap(key)
        let newKey = try XCTUnwrap(otherKey)
        try FMDatabaseCopy.encrypt(try makePlaintext(), to: path("app.db"), keyProvider: key)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path("app.db"))[.size] as? Int)
        var events: [String] = []
        let outcome = try FMDatabaseCopy.rekeyWithBackup(
            path("app.db"), keyProvider: key, to: newKey, backup: path("app.db.bak"),
            onStage: { stage in
                if case .copying = stage { events.append("copying") }
                if stage == .publishing { events.append("publishing") }
            },
            onBackup: { report in
                events.append("backup \(report.sourceBytes)")
                XCTAssertEqual(try? self.rows(self.path("app.db.bak"), key), 20, "the backup is in place")
                XCTAssertEqual(try? self.rows(self.path("app.db"), key), 20, "not rekeyed yet")
            },
            onRekey: { format in events.append("rekey \(format == CipherFormat.linkedDefault)") })
        XCTAssertEqual(outcome, .done)
        XCTAssertEqual(
            events, ["copying", "publishing", "backup \(size)", "rekey true"])
        XCTAssertEqual(try rows(path("app.db"), newKey), 20)

        events = []
        XCTAssertThrowsError(
            try FMDatabaseCopy.rekeyWithBackup(
                path("app.db"), keyProvider: newKey, to: key, backup: path("app.db.bak"),
                onBackup: { _ in events.append("backup") }, onRekey: { _ in events.append("rekey") }))
        XCTAssertEqual(events, [], "a backup refused (something is at its path) calls neither hook")
    }

    func testAMissingOrEmptySourceIsRefusedAndNothingIsCreated() throws {
        let key = try XCTUnwrap(key)
        XCTAssertThrowsError(try FMDatabaseCopy.encrypt(path("typo.db"), to: path("app.db"), keyProvider: key)) {
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_CANTOPEN))
        }
        XCTAssertEqual(entries(), [], "neither the missing SRC nor DEST was created")
        XCTAssertTrue(FileManager.default.createFile(atPath: path("empty.db"), contents: Data()))
        XCTAssertThrowsError(
            try FMDatabaseCopy.backup(path("empty.db"), keyProvider: key, to: path("backup.db"))
        ) { XCTAssertEqual(($0 as NSError).code, Int(SQLITE_NOTADB)) }
        XCTAssertEqual(entries(), ["empty.db"])
    }

    func testNoneOfTheSourcesOwnFilesIsEverADestination() throws {
        let key = try XCTUnwrap(key)
        let plain = try makePlaintext()
        for suffix in ["-keyslots", "-wal", "-journal"] {
            let side = plain + suffix
            XCTAssertTrue(FileManager.default.createFile(atPath: side, contents: Data("keep".utf8)))
            XCTAssertThrowsError(
                try FMDatabaseCopy.encrypt(plain, to: side, keyProvider: key, replacingExisting: true), suffix
            ) { XCTAssertEqual(($0 as? FMDatabaseError)?.copyFailure, .sameFile, suffix) }
            XCTAssertEqual(try String(contentsOfFile: side, encoding: .utf8), "keep", suffix)
            unlink(side)
        }
    }
}
