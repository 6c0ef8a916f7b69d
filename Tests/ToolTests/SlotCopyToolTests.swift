import FMDB
import Foundation
import TestSupport
import XCTest

/// The commands that copy or move a database carry its key slot file: `export` and `migrate` (SRC opened
/// through a slot), `rekey --data-key --backup` (the old database and old slots) and `encrypt --kdf slot`
/// (a new slotted database). Each copy opens with two passphrases and a recovery key, in the tool and the
/// library, and in the line's `sqlcipher` shell with the exported data key; its slot file is SRC's byte for
/// byte, 0600; an existing DEST-keyslots is refused before anything is written; SRC is untouched.
final class SlotCopyToolTests: ToolTestCase {
    /// Library-made slots with a cheap KDF (the tool's own slot KDF costs ~1 s per unlock here).
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)

    /// A slotted database: passphrases "alpha" (slot 1) and "beta" (slot 2), a recovery key (slot 3), and a
    /// table `t` of 50 rows.
    func makeSlotted(_ name: String = "app.db", rows: Int = 50, payload: Int = 0) throws -> (
        path: String, recovery: String
    ) {
        let file = path(name)
        try KeySlots.createDatabase(at: file, secret: .passphrase("alpha"), kdf: cheap)
        try KeySlots.addSlot(to: file, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: cheap)
        let recovery = try KeySlots.addRecoverySlot(to: file, unlockingWith: .passphrase("alpha")).key.formattedText
        let queue = try FMDatabaseQueue(path: file, keyProvider: KeySlotKeyProvider(secret: .passphrase("beta")))
        try queue.inDatabase { db in
            try db.executeUpdate("create table t (id integer primary key, v text, b blob)", values: nil)
            try db.inTransaction { db in
                for i in 0..<rows {
                    try db.executeUpdate(
                        "insert into t (v, b) values (?, randomblob(?))", values: ["row \(i)", payload])
                }
            }
        }
        queue.close()
        return (file, recovery)
    }

    func bytes(_ file: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: file)) }
    func slots(_ file: String) -> String { KeySlots.slotFilePath(forDatabaseAt: file) }

    /// The rows of `t` through the tool's `sql` with `kdf` and `key`; nil when it fails.
    func toolCount(_ file: String, kdf: String, key: String, extra: [String] = []) throws -> String? {
        let result = try run(
            ["sql", file, "--kdf", kdf, "--key-env", "K", "--csv", "select count(*) from t"] + extra, env: ["K": key])
        guard result.status == 0 else { return nil }
        return result.stdout.split(separator: "\n").last.map(String.init)
    }

    /// The data key as the tool exports it.
    func dataKeyHex(_ file: String, passphrase: String) throws -> String {
        let result = try run(
            [
                "keys", "export-raw", file, "--kdf", "slot", "--key-env", "K",
                "--i-understand-this-reveals-the-data-key",
            ],
            env: ["K": passphrase])
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What the line's `sqlcipher` shell answers to `select count(*) from t` under the raw key `hex`; nil on a
    /// line without a shell of its own (the checks through the tool and the library still run).
    func shellCount(_ file: String, hex: String, pageSize: Int? = nil, compatibility: Int? = nil) throws -> String? {
        let shell: String
        do { shell = try lineShell() } catch is XCTSkip { return nil }
        let page =
            (compatibility.map { "PRAGMA cipher_compatibility = \($0);\n" } ?? "")
            + (pageSize.map { "PRAGMA cipher_page_size = \($0);\n" } ?? "")
        let result = try runSQLCipherShell(shell, file, "PRAGMA key = \"x'\(hex)'\";\n\(page)SELECT count(*) FROM t;\n")
        // The 4.x shell answers PRAGMA key with "ok" (3.4.1 prints nothing).
        return result.stdout.split(separator: "\n").filter { $0 != "ok" }.joined(separator: "\n") + result.stderr
    }

    /// Two passphrases and the recovery key open `copy` in the tool and in the library (fresh providers),
    /// and its data key opens it in the sqlcipher shell.
    /// `compatibility`: the shell's `PRAGMA cipher_compatibility` (a SQLCipher 3 file in a 4.x shell).
    func assertEverySecretOpens(
        _ copy: String, recovery: String, pageSize: Int? = nil, compatibility: Int? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let extra = pageSize.map { ["--cipher-page-size", String($0)] } ?? []
        for (kdf, key) in [("slot", "alpha"), ("slot", "beta"), ("slot-recovery", recovery)] {
            XCTAssertEqual(
                try toolCount(copy, kdf: kdf, key: key, extra: extra), "50", "\(kdf) \(key)", file: file, line: line)
        }
        for secret in [KeySlotSecret.passphrase("alpha"), .passphrase("beta"), try .recoveryKey(recovery)] {
            let db = FMDatabase(path: copy)
            XCTAssertTrue(db.open(), file: file, line: line)
            try db.setKey(using: KeySlotKeyProvider(secret: secret), settings: CipherSettings(pageSize: pageSize))
            XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 50, "\(secret)", file: file, line: line)
            db.close()
        }
        let hex = try dataKeyHex(copy, passphrase: "beta")
        if let count = try shellCount(copy, hex: hex, pageSize: pageSize, compatibility: compatibility) {
            XCTAssertEqual(count, "50", file: file, line: line)
        }
        XCTAssertEqual(try toolCount(copy, kdf: "slot", key: "gamma", extra: extra), nil, file: file, line: line)
    }

    /// Both files of a copy are 0600 (the tool runs under umask 022), and the slot file is `expected` byte for byte.
    func assertPrivateCopy(_ copy: String, slotFile expected: Data?, file: StaticString = #filePath, line: UInt = #line)
        throws
    {
        XCTAssertEqual(mode(copy), 0o600, file: file, line: line)
        XCTAssertEqual(mode(slots(copy)), 0o600, file: file, line: line)
        if let expected { XCTAssertEqual(try bytes(slots(copy)), expected, file: file, line: line) }
        XCTAssertEqual(
            entries().filter { $0.contains("fmdb-cipher-") || $0.contains(".tmp-") }, [], "no private directory left",
            file: file, line: line)
    }

    func salt(_ file: String) throws -> Data { try bytes(file).prefix(16) }

    // MARK: - export

    func testExportCarriesTheSlotsAndEverySecretOpensTheCopy() throws {
        let (source, recovery) = try makeSlotted()
        let (before, slotsBefore) = (try bytes(source), try bytes(slots(source)))
        let copy = path("copy.db")
        let result = try run(
            ["export", source, copy, "--kdf", "slot", "--key-env", "K", "--new-cipher-page-size", "4096"],
            env: ["K": "beta"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("with its key slots"), result.stderr)
        try assertPrivateCopy(copy, slotFile: slotsBefore)
        XCTAssertEqual(try salt(copy), try salt(source))
        try assertEverySecretOpens(copy, recovery: recovery, pageSize: 4096)
        XCTAssertEqual(try bytes(source), before)
        XCTAssertEqual(try bytes(slots(source)), slotsBefore)
    }

    func testExportRefusesAnExistingDestinationSlotFileBeforeAnyWork() throws {
        let (source, _) = try makeSlotted()
        let copy = path("copy.db")
        try Data("mine".utf8).write(to: URL(fileURLWithPath: slots(copy)))
        let refused = try run(["export", source, copy, "--kdf", "slot", "--key-env", "K"], env: ["K": "alpha"])
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("copy.db-keyslots"), refused.stderr)
        // Before any work: even a wrong key is not tried (it would be exit 65).
        XCTAssertEqual(
            try run(["export", source, copy, "--kdf", "slot", "--key-env", "K"], env: ["K": "gamma"]).status, 73)
        XCTAssertFalse(FileManager.default.fileExists(atPath: copy))
        XCTAssertEqual(try bytes(slots(copy)), Data("mine".utf8))
        XCTAssertEqual(entries().filter { $0.contains("fmdb-cipher-") }, [])
        // --force replaces both.
        let forced = try run(
            ["export", source, copy, "--kdf", "slot", "--key-env", "K", "--force", "--quiet"], env: ["K": "alpha"])
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertEqual(try bytes(slots(copy)), try bytes(slots(source)))
        XCTAssertEqual(try toolCount(copy, kdf: "slot", key: "beta"), "50")
    }

    func testAFailedExportLeavesNeitherTheCopyNorItsSlotFile() throws {
        let (source, _) = try makeSlotted()
        let copy = path("copy.db")
        let wrong = try run(["export", source, copy, "--kdf", "slot", "--key-env", "K"], env: ["K": "gamma"])
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
        // A slot file of another database beside SRC: refused as it is copied.
        let (other, _) = try makeSlotted("other.db")
        let saved = try bytes(slots(source))
        try bytes(slots(other)).write(to: URL(fileURLWithPath: slots(source)))
        let swapped = try run(["export", source, copy, "--kdf", "slot", "--key-env", "K"], env: ["K": "alpha"])
        XCTAssertEqual(swapped.status, 65, swapped.stderr)
        try saved.write(to: URL(fileURLWithPath: slots(source)))
        for result in [wrong, swapped] {
            XCTAssertFalse(result.stderr.contains("alpha") || result.stderr.contains("gamma"))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: copy))
        XCTAssertFalse(FileManager.default.fileExists(atPath: slots(copy)))
        XCTAssertEqual(entries().filter { $0.contains("fmdb-cipher-") }, [])
    }

    /// DEST appears while the copy runs: the database is not moved over it, and the DEST-keyslots the run had
    /// already moved into place (the slot file goes first) is removed again; nothing of the run stays.
    func testADestThatAppearsDuringTheCopyLeavesNoOrphanSlotFile() throws {
        let (source, _) = try makeSlotted(rows: 20_000, payload: 1000)
        let dest = path("late.db")
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = "alpha"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["export", source, dest, "--kdf", "slot", "--key-env", "K", "--quiet"]
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        var started = false
        while !started, process.isRunning, Date() < deadline {
            started = entries().contains { $0.hasPrefix(".late.db.fmdb-cipher-") }
            if !started { usleep(2_000) }
        }
        XCTAssertTrue(started, "the copy works in a private directory beside DEST")
        try Data("appeared meanwhile".utf8).write(to: URL(fileURLWithPath: dest))
        process.waitUntilExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, 73, stderr)
        XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "appeared meanwhile", "not replaced")
        XCTAssertFalse(FileManager.default.fileExists(atPath: slots(dest)), "no orphan slot file")
        XCTAssertEqual(entries().filter { $0.contains("fmdb-cipher-") }, [])
    }

    func testExportUnderANewKeyIsASingleKeyDatabaseAndSaysSo() throws {
        let (source, _) = try makeSlotted()
        let copy = path("single.db")
        let result = try run(
            ["export", source, copy, "--kdf", "slot", "--key-env", "K", "--new-key-env", "N", "--new-kdf", "raw"],
            env: ["K": "alpha", "N": Self.otherRawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("single-key database"), result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: slots(copy)))
        XCTAssertEqual(rowCount(copy, rawKey: Self.otherRawKey), 50)
        // With the raw data key itself, too (no slot is opened): a single-key copy, said so.
        let hex = try dataKeyHex(source, passphrase: "alpha")
        let raw = try run(
            ["export", source, path("raw.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N"],
            env: ["K": hex, "N": Self.rawKey])
        XCTAssertEqual(raw.status, 0, raw.stderr)
        XCTAssertTrue(raw.stderr.contains("single-key database"), raw.stderr)
        XCTAssertEqual(rowCount(path("raw.db"), rawKey: Self.rawKey), 50)
        let slotNewKDF = try run(
            ["export", source, path("x.db"), "--kdf", "slot", "--key-env", "K", "--new-kdf", "slot"],
            env: ["K": "alpha"])
        XCTAssertEqual(slotNewKDF.status, 64, slotNewKDF.stderr)
    }

    /// Mallory, who has her own slot in shared.db, copies shared.db-keyslots to victim.db-keyslots; the victim,
    /// whose secret also opens a slot of shared.db, runs `sql victim.db --kdf slot` on a victim.db that does not
    /// exist yet. The planted slot file is not adopted: exit 66, nothing written, no victim.db left; Mallory's
    /// secret reads nothing. The same for an empty victim.db (left as it was).
    func testSQLDoesNotCreateADatabaseUnderAPlantedSlotFile() throws {
        let shared = path("shared.db")
        try KeySlots.createDatabase(at: shared, secret: .passphrase("mallory"), kdf: cheap)
        try KeySlots.addSlot(
            to: shared, unlockingWith: .passphrase("mallory"), newSecret: .passphrase("victim"), kdf: cheap)
        let victim = path("victim.db")
        try FileManager.default.copyItem(atPath: slots(shared), toPath: slots(victim))
        let script = "CREATE TABLE s(x); INSERT INTO s VALUES('victim secret')"
        let refused = try run(
            ["sql", victim, "--kdf", "slot", "--key-env", "V", "--create", script], env: ["V": "victim"])
        XCTAssertEqual(refused.status, 66, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("keys init"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: victim), "the empty file the run made is removed")
        let read = try run(
            ["sql", victim, "--kdf", "slot", "--key-env", "M", "--csv", "SELECT x FROM s"], env: ["M": "mallory"])
        XCTAssertNotEqual(read.status, 0, read.stdout)
        XCTAssertFalse(read.stdout.contains("victim secret"))
        // An empty file: refused, and left as it was.
        XCTAssertTrue(FileManager.default.createFile(atPath: victim, contents: nil))
        let empty = try run(["sql", victim, "--kdf", "slot", "--key-env", "V", script], env: ["V": "victim"])
        XCTAssertEqual(empty.status, 66, empty.stderr)
        XCTAssertEqual(try bytes(victim).count, 0)
    }

    // MARK: - migrate

    func testMigrateCarriesTheSlotsIntoDestAndInPlace() throws {
        let (source, recovery) = try makeSlotted()
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            // SQLCipher 3.x cannot write SQLCipher 4 files: refused before anything is written.
            let refused = try run(
                ["migrate", source, path("m.db"), "--kdf", "slot", "--key-env", "K"], env: ["K": "alpha"])
            XCTAssertEqual(refused.status, 64, refused.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("m.db")))
            XCTAssertFalse(FileManager.default.fileExists(atPath: slots(path("m.db"))))
            return
        }
        // A SQLCipher 3 slotted file, made by export --format 3 (which carries the slots too).
        let v3 = path("v3.db")
        let exported = try run(
            ["export", source, v3, "--kdf", "slot", "--key-env", "K", "--format", "3", "--quiet"], env: ["K": "alpha"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let slotsV3 = try bytes(slots(v3))
        try assertEverySecretOpens(v3, recovery: recovery, compatibility: 3)
        XCTAssertEqual(try format(v3), .v3)
        // Under the raw data key the upgraded file would get a new salt: refused, nothing written.
        let hex = try dataKeyHex(v3, passphrase: "alpha")
        let raw = try run(["migrate", v3, "--kdf", "raw", "--key-env", "K"], env: ["K": hex])
        XCTAssertEqual(raw.status, 64, raw.stderr)
        // Into DEST.
        let before = try bytes(v3)
        let migrated = path("v4.db")
        let intoDest = try run(
            ["migrate", v3, migrated, "--kdf", "slot-recovery", "--key-env", "K"], env: ["K": recovery])
        XCTAssertEqual(intoDest.status, 0, intoDest.stderr)
        try assertPrivateCopy(migrated, slotFile: slotsV3)
        XCTAssertEqual(try salt(migrated), try salt(v3))
        try assertEverySecretOpens(migrated, recovery: recovery)
        XCTAssertEqual(try format(migrated), .v4)
        XCTAssertEqual(try bytes(v3), before, "SRC untouched")
        // In place: SRC's slot file stays as it is and opens the upgraded file.
        let inPlace = try run(["migrate", v3, "--kdf", "slot", "--key-env", "K"], env: ["K": "beta"])
        XCTAssertEqual(inPlace.status, 0, inPlace.stderr)
        XCTAssertEqual(try bytes(slots(v3)), slotsV3)
        XCTAssertEqual(try format(v3), .v4)
        try assertEverySecretOpens(v3, recovery: recovery)
        // An existing DEST-keyslots: refused before any work.
        try Data("mine".utf8).write(to: URL(fileURLWithPath: slots(path("again.db"))))
        let refused = try run(
            ["migrate", source, path("again.db"), "--kdf", "slot", "--key-env", "K"], env: ["K": "alpha"])
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("again.db")))
        XCTAssertEqual(try bytes(slots(path("again.db"))), Data("mine".utf8))
    }

    /// An in-place migrate holds SRC's slot file lock (the one `keys` changes and `rekey --data-key` hold) from
    /// before the copy until SRC is replaced: while another process holds it, SRC is not replaced; once it is
    /// released, the migration finishes.
    func testInPlaceMigrateWaitsForTheSlotFileLock() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { throw XCTSkip("migrate needs SQLCipher 4 linked") }
        let (source, _) = try makeSlotted()
        let v3 = path("v3.db")
        let exported = try run(
            ["export", source, v3, "--kdf", "slot", "--key-env", "K", "--format", "3", "--quiet"], env: ["K": "alpha"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let before = try bytes(v3)
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = "alpha"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["migrate", v3, "--kdf", "slot", "--key-env", "K", "--quiet"]
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try KeySlots.withSlotFileLock(forDatabaseAt: v3) {
            try process.run()
            // Long enough for an unlocked migration of 50 rows to finish many times over.
            Thread.sleep(forTimeInterval: 3)
            XCTAssertTrue(process.isRunning, "migrate waits for the lock")
            XCTAssertEqual(try bytes(v3), before, "SRC not replaced while another process holds its slot file lock")
        }
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertEqual(try format(v3), .v4)
        XCTAssertEqual(try toolCount(v3, kdf: "slot", key: "beta"), "50")
    }

    func format(_ file: String) throws -> CipherFormat? {
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("alpha")))
        return db.cipherFormat
    }

    // MARK: - rekey --data-key --backup

    func testRekeyDataKeyBackupIsTheOldDatabaseWithTheOldSlots() throws {
        let (source, recovery) = try makeSlotted()
        let oldSlots = try bytes(slots(source))
        let oldHex = try dataKeyHex(source, passphrase: "alpha")
        let recoveryFile = path("recovery.txt")
        let betaFile = path("beta.txt")
        try Data((recovery + "\n").utf8).write(to: URL(fileURLWithPath: recoveryFile))
        try Data("beta\n".utf8).write(to: URL(fileURLWithPath: betaFile))
        XCTAssertEqual(chmod(recoveryFile, 0o600) + chmod(betaFile, 0o600), 0)

        // An existing backup slot file: refused before the rotation starts.
        try Data("mine".utf8).write(to: URL(fileURLWithPath: slots(path("stale.bak"))))
        let before = try bytes(source)
        let refused = try run(
            [
                "rekey", "--data-key", source, "--kdf", "slot", "--key-env", "K", "--slot-key-file", betaFile,
                "--slot-key-file", recoveryFile, "--backup", path("stale.bak"),
            ], env: ["K": "alpha"])
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertEqual(try bytes(source), before)
        XCTAssertEqual(try bytes(slots(source)), oldSlots)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("stale.bak")))
        XCTAssertEqual(try bytes(slots(path("stale.bak"))), Data("mine".utf8))

        let backup = path("app.bak")
        let rotated = try run(
            [
                "rekey", "--data-key", source, "--kdf", "slot", "--key-env", "K", "--slot-key-file", betaFile,
                "--slot-key-file", recoveryFile, "--backup", backup,
            ], env: ["K": "alpha"])
        XCTAssertEqual(rotated.status, 0, rotated.stderr)
        try assertPrivateCopy(backup, slotFile: oldSlots)
        // The backup: old data key, old salt, old slots; every old secret opens it.
        XCTAssertEqual(try salt(backup), try salt(source))
        try assertEverySecretOpens(backup, recovery: recovery)
        XCTAssertEqual(try dataKeyHex(backup, passphrase: "beta"), oldHex)
        // The database itself: a new data key (the old one no longer opens it); its slots still open it.
        XCTAssertNotEqual(try bytes(slots(source)), oldSlots)
        XCTAssertFalse(try shellCount(source, hex: oldHex)?.hasPrefix("50") ?? false)
        XCTAssertNotEqual(try dataKeyHex(source, passphrase: "alpha"), oldHex)
        try assertEverySecretOpens(source, recovery: recovery)
    }

    // MARK: - encrypt

    func testEncryptWithSlotsMakesASlottedDatabase() throws {
        let plain = try makePlaintext()
        let before = try bytes(plain)
        let app = path("app.db")
        XCTAssertEqual(
            try run(["encrypt", plain, app, "--recovery", "--key-env", "K"], env: ["K": "alpha"]).status, 64)
        XCTAssertEqual(
            try run(["encrypt", plain, app, "--kdf", "slot-recovery", "--key-env", "K"], env: ["K": "alpha"]).status, 64
        )
        // An existing DEST-keyslots: refused before any work.
        try Data("mine".utf8).write(to: URL(fileURLWithPath: slots(app)))
        let refused = try run(["encrypt", plain, app, "--kdf", "slot", "--key-env", "K"], env: ["K": "alpha"])
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: app))
        XCTAssertEqual(try bytes(slots(app)), Data("mine".utf8))
        try FileManager.default.removeItem(atPath: slots(app))

        let made = try run(
            ["encrypt", plain, app, "--kdf", "slot", "--slot-kdf", "scrypt", "--recovery", "--key-env", "K"],
            env: ["K": "alpha"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let recovery = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(recovery.split(separator: "-").count, 9, made.stdout)
        XCTAssertTrue(made.stderr.contains("Recovery key for slot 2"), made.stderr)
        let added = try run(
            ["keys", "add", app, "--kdf", "slot", "--key-env", "K", "--new-key-env", "N"],
            env: ["K": "alpha", "N": "beta"])
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: app).map(\.kind), [.passphrase, .recoveryKey, .passphrase])
        try assertPrivateCopy(app, slotFile: nil)
        try assertEverySecretOpens(app, recovery: recovery)
        XCTAssertEqual(try bytes(plain), before)

        // A raw-key slot, without a recovery key.
        let rawApp = path("raw.db")
        let raw = try run(
            ["encrypt", plain, rawApp, "--kdf", "slot-raw", "--key-env", "K", "--quiet"], env: ["K": Self.rawKey])
        XCTAssertEqual(raw.status, 0, raw.stderr)
        XCTAssertEqual(raw.stdout, "")
        XCTAssertEqual(try toolCount(rawApp, kdf: "slot-raw", key: Self.rawKey), "50")
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: rawApp).map(\.kind), [.rawKey])
    }
}
