import FMDB
import Foundation
import TestSupport
import XCTest

/// What the tool knows about a file that the file does not say: the settings a new file needs at every
/// open, the KDF an open really used, the key slots beside a database (found without --kdf slot), and the
/// side files a read-only command must not leave.
final class ToolFileStateTests: ToolTestCase {
    /// A cipher page size that is not the default of either format (1024 for 3, 4096 for 4).
    static let oddPageSize = "8192"

    /// The flags of the tool's note on `stderr` (nil: no note).
    func noteFlags(_ stderr: String) -> [String]? {
        guard let line = stderr.split(separator: "\n").first(where: { $0.contains("needs these settings") }),
            let colon = line.range(of: "them): ")
        else { return nil }
        return line[colon.upperBound...].split(separator: " ").map(String.init)
    }

    // MARK: - Settings the file does not record

    func testEncryptWithNonDefaultSettingsSaysTheFlagsThatOpenIt() throws {
        let plain = try makePlaintext()
        let secret = path("secret.db")
        let made = try run(
            [
                "encrypt", plain, secret, "--kdf", "raw", "--new-cipher-page-size", Self.oddPageSize, "--key-env", "K",
                "--quiet",
            ],
            env: ["K": Self.rawKey])
        XCTAssertEqual(made.status, 0, made.stderr)
        let flags = try XCTUnwrap(noteFlags(made.stderr), made.stderr)
        XCTAssertEqual(flags, ["--kdf", "raw", "--cipher-page-size", Self.oddPageSize])
        XCTAssertFalse(made.stderr.contains(Self.rawKey))
        // The flags said are the ones that open it; without them it does not open.
        let opened = try run(["check", secret, "--key-env", "K"] + flags, env: ["K": Self.rawKey])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertEqual(
            try run(["check", secret, "--key-env", "K", "--kdf", "raw"], env: ["K": Self.rawKey]).status, 65)
        // info, tried with the format's defaults, names the settings a file may need.
        let info = try run(["info", secret, "--key-env", "K", "--kdf", "raw"], env: ["K": Self.rawKey])
        XCTAssertEqual(info.status, 65, info.stderr)
        XCTAssertTrue(info.stderr.contains("--cipher-page-size"), info.stderr)

        // Default settings (a passphrase SQLCipher derives itself): nothing to say.
        let plainDefault = try run(
            ["encrypt", plain, path("default.db"), "--key-env", "K", "--quiet"], env: ["K": "a passphrase"])
        XCTAssertEqual(plainDefault.status, 0, plainDefault.stderr)
        XCTAssertNil(noteFlags(plainDefault.stderr), plainDefault.stderr)
    }

    func testEncryptWithOtherKDFIterationsSaysThem() throws {
        let plain = try makePlaintext()
        let secret = path("iter.db")
        let made = try run(
            ["encrypt", plain, secret, "--new-kdf-iter", "70000", "--key-env", "K", "--quiet"],
            env: ["K": "a passphrase"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let flags = try XCTUnwrap(noteFlags(made.stderr), made.stderr)
        XCTAssertEqual(flags, ["--kdf-iter", "70000"])
        let info = try run(["info", secret, "--key-env", "K", "--json"] + flags, env: ["K": "a passphrase"])
        XCTAssertEqual(info.status, 0, info.stderr)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any], info.stdout)
        // A passphrase SQLCipher derives itself: kdf_iter is the derivation, and the flags are said back.
        XCTAssertEqual(object["kdf_iter"] as? Int, 70000)
        XCTAssertEqual(object["open_with"] as? [String], ["--kdf-iter", "70000"])
        XCTAssertTrue((object["key_derivation"] as? String)?.contains("x 70000") == true, "\(object)")
    }

    func testExportWithNonDefaultSettingsSaysTheFlagsThatOpenIt() throws {
        let source = try makeEncrypted()
        let copy = path("copy.db")
        let exported = try run(
            [
                "export", source, copy, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N",
                "--new-cipher-page-size", Self.oddPageSize, "--quiet",
            ], env: ["K": Self.rawKey, "N": Self.otherRawKey])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let flags = try XCTUnwrap(noteFlags(exported.stderr), exported.stderr)
        XCTAssertEqual(flags, ["--kdf", "raw", "--cipher-page-size", Self.oddPageSize])
        XCTAssertEqual(
            try run(["check", copy, "--key-env", "N"] + flags, env: ["N": Self.otherRawKey]).status, 0)
    }

    func testInfoReportsTheDerivationUsedNotSQLCiphersUnusedKDFIter() throws {
        let source = try makeEncrypted()
        let info = try run(["info", source, "--kdf", "raw", "--key-env", "K", "--json"], env: ["K": Self.rawKey])
        XCTAssertEqual(info.status, 0, info.stderr)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any], info.stdout)
        XCTAssertEqual(object["kdf"] as? String, "raw")
        // A raw key reaches SQLCipher without its KDF: no iteration count is reported as if it were used.
        XCTAssertNil(object["kdf_iter"], "\(object)")
        XCTAssertTrue((object["key_derivation"] as? String)?.contains("raw") == true, "\(object)")
        XCTAssertEqual(object["open_with"] as? [String], ["--kdf", "raw"])
    }

    func testRekeyToAnotherKDFSaysTheFlags() throws {
        let source = try makeEncrypted()
        let rekeyed = try run(
            [
                "rekey", source, "--kdf", "raw", "--key-env", "K", "--new-kdf", "pbkdf2", "--new-key-env", "N",
                "--quiet",
            ],
            env: ["K": Self.rawKey, "N": "a new passphrase"])
        XCTAssertEqual(rekeyed.status, 0, rekeyed.stderr)
        XCTAssertEqual(noteFlags(rekeyed.stderr), ["--kdf", "pbkdf2"], rekeyed.stderr)
    }

    // MARK: - Rekey to the same key

    func testRekeyToTheKeyThatAlreadyOpensTheFileIsRefused() throws {
        let source = try makeEncrypted()
        let before = try Data(contentsOf: URL(fileURLWithPath: source))
        // The same key from another source: decided by trying it, not by comparing what was given.
        let keyFile = path("new.key")
        XCTAssertTrue(FileManager.default.createFile(atPath: keyFile, contents: Data(Self.rawKey.utf8)))
        XCTAssertEqual(chmod(keyFile, 0o600), 0)
        let refused = try run(
            ["rekey", source, "--kdf", "raw", "--key-env", "K", "--new-key-file", keyFile], env: ["K": Self.rawKey])
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("already opens"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: source)), before, "the file was rewritten")

        // Another key is a rekey as before.
        let rekeyed = try run(
            ["rekey", source, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--quiet"],
            env: ["K": Self.rawKey, "N": Self.otherRawKey])
        XCTAssertEqual(rekeyed.status, 0, rekeyed.stderr)
        XCTAssertEqual(rowCount(source, rawKey: Self.otherRawKey), 50)
    }

    // MARK: - Slots are found

    /// A slotted database with rows: a raw-key slot (`rawKey`), a passphrase slot and a recovery slot;
    /// returns the database and the recovery key.
    func makeSlotted(_ name: String = "slotted.db") throws -> (db: String, recovery: String) {
        let plain = try makePlaintext("src-\(name)", rows: 7)
        let db = path(name)
        let made = try run(
            ["encrypt", plain, db, "--kdf", "slot-raw", "--recovery", "--key-env", "K", "--quiet"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(made.status, 0, made.stderr)
        let recovery = try XCTUnwrap(made.stdout.split(separator: "\n").last.map(String.init), made.stdout)
        let added = try run(
            ["keys", "add", db, "--kdf", "slot-raw", "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": Self.rawKey, "N": "the operators' passphrase"])
        XCTAssertEqual(added.status, 0, added.stderr)
        return (db, recovery)
    }

    func testEveryKindOfSlotSecretOpensWithoutKDFSlot() throws {
        let (db, recovery) = try makeSlotted()
        for secret in [Self.rawKey, "the operators' passphrase", recovery] {
            let sql = try run(["sql", db, "select count(*) from t", "--csv", "--key-env", "K"], env: ["K": secret])
            XCTAssertEqual(sql.status, 0, sql.stderr)
            XCTAssertEqual(sql.stdout.split(whereSeparator: \.isNewline), ["count(*)", "7"])
            let check = try run(["check", db, "--key-env", "K"], env: ["K": secret])
            XCTAssertEqual(check.status, 0, check.stderr)
        }
        let wrong = try run(["sql", db, "select 1", "--key-env", "K"], env: ["K": "not a slot's secret"])
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
    }

    func testAPlantedSlotFileDoesNotMakeASingleKeyDatabasesRightKeyFail() throws {
        // A single-key database (a passphrase) with another database's slot file planted beside it.
        let plain = try makePlaintext(rows: 7)
        let single = path("single.db")
        let made = try run(["encrypt", plain, single, "--key-env", "K", "--quiet"], env: ["K": "the single key"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let (slotted, _) = try makeSlotted()
        let planted = KeySlots.slotFilePath(forDatabaseAt: single)
        try FileManager.default.copyItem(atPath: KeySlots.slotFilePath(forDatabaseAt: slotted), toPath: planted)

        // No slot accepts the key; as a passphrase it opens the file, and the slot file is named as not its own.
        let sql = try run(
            ["sql", single, "select count(*) from t", "--csv", "--key-env", "K"], env: ["K": "the single key"])
        XCTAssertEqual(sql.status, 0, sql.stderr)
        XCTAssertEqual(sql.stdout.split(whereSeparator: \.isNewline), ["count(*)", "7"])
        XCTAssertTrue(sql.stderr.contains("warning: no key slot in \(planted)"), sql.stderr)
        XCTAssertTrue(sql.stderr.contains("does not belong"), sql.stderr)
        for command in [["check", single], ["info", single]] {
            let result = try run(command + ["--key-env", "K"], env: ["K": "the single key"])
            XCTAssertEqual(result.status, 0, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("does not belong"), "\(command): \(result.stderr)")
        }
        // A copy of it is a single-key copy: no slot file travels with it.
        let copy = path("single-copy.db")
        let exported = try run(
            ["export", single, copy, "--key-env", "K", "--new-key-env", "K", "--quiet"], env: ["K": "the single key"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: KeySlots.slotFilePath(forDatabaseAt: copy)))
        // A wrong key is still a wrong key, without the warning.
        let wrong = try run(["sql", single, "select 1", "--key-env", "K"], env: ["K": "not the key"])
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
        XCTAssertFalse(wrong.stderr.contains("does not belong"), wrong.stderr)
        // What would carry or rewrite the slot file refuses until it is moved away: rekey, and migrate (4.x).
        let rekey = try run(
            ["rekey", single, "--key-env", "K", "--new-key-env", "N", "--quiet"],
            env: ["K": "the single key", "N": "another long key"])
        XCTAssertEqual(rekey.status, 64, rekey.stderr)
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            let migrate = try run(["migrate", single, "--key-env", "K", "--quiet"], env: ["K": "the single key"])
            XCTAssertEqual(migrate.status, 64, migrate.stderr)
        }
        let still = try run(["check", single, "--key-env", "K"], env: ["K": "the single key"])
        XCTAssertEqual(still.status, 0, still.stderr)
    }

    func testARealSlottedDatabaseWithAWrongKeyIsStillAWrongKey() throws {
        let (db, _) = try makeSlotted()
        for command in [["sql", db, "select 1"], ["check", db], ["info", db]] {
            let wrong = try run(command + ["--key-env", "K"], env: ["K": "not a slot's secret"])
            XCTAssertEqual(wrong.status, 65, "\(command): \(wrong.stderr)")
            XCTAssertFalse(wrong.stderr.contains("does not belong"), "\(command): \(wrong.stderr)")
            XCTAssertFalse(wrong.stderr.contains("not a slot's secret"), wrong.stderr)
        }
    }

    func testCopiesAndSlotChangesFindTheSlots() throws {
        let (db, _) = try makeSlotted()
        // export without --kdf slot carries the slots (the source was opened through one).
        let copy = path("copy.db")
        let exported = try run(
            ["export", db, copy, "--key-env", "K", "--quiet"], env: ["K": "the operators' passphrase"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: KeySlots.slotFilePath(forDatabaseAt: copy)))
        let plain = path("plain-out.db")
        let decrypted = try run(["decrypt", copy, plain, "--key-env", "K", "--quiet"], env: ["K": Self.rawKey])
        XCTAssertEqual(decrypted.status, 0, decrypted.stderr)
        // A raw key opens its slot for a slot change without --kdf slot-raw.
        let added = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": Self.rawKey, "N": "a third long passphrase"])
        XCTAssertEqual(added.status, 0, added.stderr)

        // info with a slot's key, no --kdf: opened through the slot, the file's details read.
        let info = try run(["info", db, "--key-env", "K", "--json"], env: ["K": "the operators' passphrase"])
        XCTAssertEqual(info.status, 0, info.stderr)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any], info.stdout)
        XCTAssertEqual(object["kdf"] as? String, "slot", "\(object)")
        let tables = try XCTUnwrap(object["tables"] as? [[String: Any]], "\(object)")
        XCTAssertEqual(tables.first { $0["name"] as? String == "t" }?["rows"] as? Int, 7, "\(tables)")

        // migrate, no --kdf: a format-3 copy (with the slots) is upgraded through a slot into DEST, which its
        // slot file (carried) opens.
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { return }
        let old = path("old3.db")
        let v3 = try run(
            ["export", db, old, "--key-env", "K", "--format", "3", "--quiet"], env: ["K": "the operators' passphrase"])
        XCTAssertEqual(v3.status, 0, v3.stderr)
        let upgraded = path("upgraded.db")
        let migrated = try run(
            ["migrate", old, upgraded, "--key-env", "K", "--quiet"], env: ["K": "the operators' passphrase"])
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: KeySlots.slotFilePath(forDatabaseAt: upgraded)))
        for secret in ["the operators' passphrase", Self.rawKey] {
            let sql = try run(
                ["sql", upgraded, "select count(*) from t", "--csv", "--read-only", "--key-env", "K"],
                env: ["K": secret])
            XCTAssertEqual(sql.status, 0, sql.stderr)
            XCTAssertEqual(sql.stdout.split(whereSeparator: \.isNewline), ["count(*)", "7"])
        }
        let format = try run(["info", upgraded, "--key-env", "K", "--json"], env: ["K": Self.rawKey])
        let upgradedObject = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(format.stdout.utf8)) as? [String: Any], format.stdout)
        XCTAssertEqual(upgradedObject["format"] as? String, "SQLCipher 4", "\(upgradedObject)")
    }

    func testInfoShowsTheSlotsWithoutAKeyAndWithoutASecret() throws {
        let (db, recovery) = try makeSlotted()
        let info = try run(["info", db, "--json"])
        XCTAssertEqual(info.status, 0, info.stderr)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any], info.stdout)
        let slots = try XCTUnwrap(object["key_slots"] as? [[String: Any]], "\(object)")
        XCTAssertEqual(slots.compactMap { $0["id"] as? Int }, [1, 2, 3])
        XCTAssertEqual(slots.compactMap { $0["kind"] as? String }, ["raw", "recovery", "passphrase"])
        XCTAssertTrue(slots.allSatisfy { ($0["kdf"] as? String)?.isEmpty == false }, "\(slots)")
        let text = try run(["info", db])
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.contains("key slots: \(db)-keyslots"), text.stdout)
        for output in [info.stdout, text.stdout] {
            XCTAssertFalse(output.contains(recovery))
            XCTAssertFalse(output.contains(Self.rawKey))
        }
    }

    func testKeysListOfAMissingDatabaseNamesTheDatabase() throws {
        let missing = path("nope.db")
        let listed = try run(["keys", "list", missing])
        XCTAssertEqual(listed.status, 66, listed.stderr)
        XCTAssertTrue(listed.stderr.contains("\(missing): no such file"), listed.stderr)
    }

    // MARK: - No surprises

    func testReadOnlyCommandsLeaveNoSideFilesOfAWALDatabase() throws {
        let db = try makeEncrypted("wal.db")
        let connection = FMDatabase(path: db)
        XCTAssertTrue(connection.open())
        var hex = Self.rawKey
        let provider = try hex.withUTF8 {
            try RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0)))
        }
        try connection.setKey(using: provider)
        XCTAssertEqual(connection.string(forQuery: "PRAGMA journal_mode = WAL"), "wal")
        connection.close()
        let before = entries()
        XCTAssertFalse(before.contains("wal.db-wal"), "\(before)")
        let env = ["K": Self.rawKey]
        for arguments in [
            ["info", db, "--kdf", "raw", "--key-env", "K"],
            ["check", db, "--kdf", "raw", "--key-env", "K"],
            ["sql", db, "select count(*) from t", "--read-only", "--kdf", "raw", "--key-env", "K"],
        ] {
            let result = try run(arguments, env: env)
            XCTAssertEqual(result.status, 0, "\(arguments[0]): \(result.stderr)")
            XCTAssertEqual(entries(), before, "\(arguments[0]) left side files")
        }
        let exported = try run(
            ["export", db, path("out.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "K", "--quiet"], env: env)
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertEqual(entries().filter { !$0.hasPrefix("out.db") }, before, "export left side files of its source")
        // Read-only still means read-only.
        let write = try run(
            ["sql", db, "insert into t (v) values ('x')", "--read-only", "--kdf", "raw", "--key-env", "K"], env: env)
        XCTAssertEqual(write.status, 1, "a refused write is an SQL error, not an I/O error: \(write.stderr)")
        let fileBefore = try Data(contentsOf: URL(fileURLWithPath: db))
        for sql in [
            "PRAGMA query_only = OFF; insert into t (v) values ('x')", "PRAGMA journal_mode = DELETE",
            "PRAGMA main.journal_mode = delete", "select * from pragma_journal_mode('delete')", "VACUUM",
            "PRAGMA wal_checkpoint", "create temp table x (a)",
        ] {
            let refused = try run(["sql", db, sql, "--read-only", "--kdf", "raw", "--key-env", "K"], env: env)
            XCTAssertEqual(refused.status, 1, "\(sql): \(refused.stderr)")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: db)), fileBefore, "the file did not change")
        XCTAssertEqual(entries().filter { !$0.hasPrefix("out.db") }, before)
        // Reading is not refused for naming a PRAGMA, nor for reading one with an argument.
        let reads = try run(
            [
                "sql", db,
                "select count(*) from t where v like '%query_only%'; PRAGMA table_info(t); PRAGMA user_version",
                "--read-only", "--kdf", "raw", "--key-env", "K",
            ], env: env)
        XCTAssertEqual(reads.status, 0, reads.stderr)
        XCTAssertEqual(rowCount(db, rawKey: Self.rawKey), 50)
    }

    func testSQLOutputFileIsPrivateNeverFollowsALinkAndAppearsOnlyWhenComplete() throws {
        let db = try makeEncrypted()
        let env = ["K": Self.rawKey]
        let base = ["--csv", "--kdf", "raw", "--key-env", "K"]
        let out = path("rows.csv")
        let written = try run(["sql", db, "select v from t"] + base + ["--output", out], env: env)
        XCTAssertEqual(written.status, 0, written.stderr)
        XCTAssertEqual(written.stdout, "")
        XCTAssertEqual(mode(out), 0o600, "created private whatever the umask (022 here)")
        let text = try String(contentsOfFile: out, encoding: .utf8)
        XCTAssertTrue(text.contains("MARKER-49"), text)
        // An existing FILE is refused unless --force.
        XCTAssertEqual(try run(["sql", db, "select 1"] + base + ["--output", out], env: env).status, 73)
        XCTAssertEqual(try run(["sql", db, "select 1"] + base + ["--output", out, "--force"], env: env).status, 0)
        XCTAssertEqual(try String(contentsOfFile: out, encoding: .utf8).split(whereSeparator: \.isNewline), ["1", "1"])
        // A planted link is refused, its target untouched.
        let target = path("target.txt")
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("keep".utf8)))
        let link = path("link.csv")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        XCTAssertEqual(try run(["sql", db, "select v from t"] + base + ["--output", link], env: env).status, 73)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "keep")
        // A statement that fails: no FILE, and no private directory left.
        let failed = path("failed.csv")
        let failure = try run(
            ["sql", db, "select v from t; select * from nope"] + base + ["--output", failed], env: env)
        XCTAssertEqual(failure.status, 1, failure.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: failed))
        XCTAssertEqual(entries().filter { $0.contains("fmdb-cipher-") }, [])
        // FILE is never the database the rows come from, even with --force.
        let same = try run(["sql", db, "select v from t"] + base + ["--output", db, "--force"], env: env)
        XCTAssertEqual(same.status, 64, same.stderr)
        XCTAssertEqual(rowCount(db, rawKey: Self.rawKey), 50)
    }

    func testKeysAddWarnsOnAShortPassphraseAndRefusesOneThatOpensASlot() throws {
        let (db, _) = try makeSlotted()
        let short = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": Self.rawKey, "N": "short"])
        XCTAssertEqual(short.status, 0, short.stderr)
        XCTAssertTrue(short.stderr.contains("shorter than 12"), short.stderr)
        let long = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": Self.rawKey, "N": "twelve chars"])
        XCTAssertEqual(long.status, 0, long.stderr)
        XCTAssertFalse(long.stderr.contains("warning"), long.stderr)
        let again = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": Self.rawKey, "N": "the operators' passphrase"])
        XCTAssertEqual(again.status, 64, again.stderr)
        XCTAssertTrue(again.stderr.contains("already opens"), again.stderr)
    }

    func testKeysInitWhoseRecoveryStepFailsSaysWhatItLeft() throws {
        let shim = try FaultShim.shared()
        let work = path("init")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let db = work + "/db"
        let arguments = ["keys", "init", db, "--kdf", "slot-raw", "--key-env", "A", "--recovery"]
        var environment = ProcessInfo.processInfo.environment
        environment["A"] = Self.rawKey
        let plan = try shim.plan(tool, arguments, folder: work, environment: environment)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        // The recovery slot is the last slot file write: its rename fails.
        let point = try XCTUnwrap(
            plan.calls.lastIndex { $0.operation.hasPrefix("rename") && $0.path.hasSuffix("-keyslots") }, "\(plan.calls)"
        )
        try FileManager.default.removeItem(atPath: work)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let result = try shim.run(tool, arguments, folder: work, at: point + 1, mode: .eio, environment: environment)
        XCTAssertEqual(result.status, 5, result.stderr)
        XCTAssertTrue(result.stderr.contains("no recovery slot"), result.stderr)
        XCTAssertTrue(result.stderr.contains("keys recovery"), result.stderr)
        // What it says is what there is: the database opens through slot 1, and there is no recovery slot.
        let listed = try run(["keys", "list", db, "--json"])
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertFalse(listed.stdout.contains("recovery"), listed.stdout)
        let opened = try run(
            ["sql", db, "select count(*) from sqlite_master", "--key-env", "A"], env: ["A": Self.rawKey])
        XCTAssertEqual(opened.status, 0, opened.stderr)
    }
}
