import FMDB
import Foundation
import TestSupport
import XCTest

/// End-to-end tests of the `fmdb-cipher` binary: every subcommand, key source, exit code and error
/// path, run as a subprocess. Keys reach it through the environment, files or standard input only.
final class FMDBCipherToolTests: ToolTestCase {
    /// A plaintext database made with the library, with a user_version and a marker.
    func makeMarkedPlaintext(_ name: String = "plain.db", rows: Int = 50) throws -> String {
        let file = path(name)
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text, b blob)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<rows {
            XCTAssertTrue(db.executeUpdate("insert into t (v, b) values (?, ?)", "MARKER-\(i)", Data([UInt8(i % 256)])))
        }
        XCTAssertTrue(db.commit())
        db.userVersion = 42
        db.applicationID = 0x1234
        db.close()
        return file
    }

    func makePassphraseEncrypted(_ name: String = "enc.db", key: String = "k1") throws -> String {
        let plain = try makeMarkedPlaintext("src-\(name)")
        let result = try run(["encrypt", plain, path(name), "--key-env", "K", "--quiet"], env: ["K": key])
        XCTAssertEqual(result.status, 0, result.stderr)
        return path(name)
    }

    func rowCount(_ file: String, key: String?) -> Int32? {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open() else { return nil }
        defer { db.close() }
        if let key {
            guard (try? db.setKey(using: PassphraseKeyProvider(key))) != nil else { return nil }
        }
        guard let rs = db.executeQuery("select count(*) from t"), rs.next() else { return nil }
        return rs.int(forColumnIndex: 0)
    }

    func testSQLNeverCreatesADatabaseUnlessAskedAndCanOpenReadOnly() throws {
        let typo = path("mistyped.db")
        let missing = try run(["sql", typo, "select 1", "--key-env", "K"], env: ["K": "k1"])
        XCTAssertEqual(missing.status, 66, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("--create"), missing.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: typo), "a mistyped path makes no file")
        let made = try run(
            ["sql", typo, "create table t (a); insert into t values (1)", "--key-env", "K", "--create"],
            env: ["K": "k1"])
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertEqual(rowCount(typo, key: "k1"), 1)

        let write = try run(
            ["sql", typo, "insert into t values (2)", "--key-env", "K", "--read-only"], env: ["K": "k1"])
        // A write refused under --read-only is an SQL error (exit 1), not an I/O error.
        XCTAssertEqual(write.status, 1, write.stderr)
        XCTAssertTrue(write.stderr.contains("answers queries only"), write.stderr)
        let read = try run(
            ["sql", typo, "select count(*) from t", "--key-env", "K", "--read-only", "--csv"], env: ["K": "k1"])
        XCTAssertEqual(read.status, 0, read.stderr)
        XCTAssertEqual(rowCount(typo, key: "k1"), 1, "nothing was written")
        let both = try run(["sql", typo, "select 1", "--key-env", "K", "--read-only", "--create"], env: ["K": "k1"])
        XCTAssertEqual(both.status, 64, both.stderr)
    }

    // MARK: - Subcommands

    func testEncryptProducesAVerifiedEncryptedCopy() throws {
        let plain = try makeMarkedPlaintext()
        let before = try Data(contentsOf: URL(fileURLWithPath: plain))
        let result = try run(
            ["encrypt", plain, path("enc.db"), "--key-env", "DB_KEY"], env: ["DB_KEY": "correct horse"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "", "data on stdout only; messages on stderr")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path("enc.db")))
        XCTAssertNotEqual(bytes.prefix(16), Data("SQLite format 3\u{0}".utf8))
        XCTAssertFalse(bytes.contains(bytes: "MARKER-"))
        XCTAssertEqual(rowCount(path("enc.db"), key: "correct horse"), 50)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: plain)), before, "SRC is untouched")
        let db = FMDatabase(path: path("enc.db"))
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("correct horse"))
        XCTAssertEqual(db.userVersion, 42, "user_version copied")
        XCTAssertEqual(db.applicationID, 0x1234, "application_id copied")
        db.close()
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter {
            $0.hasSuffix(".tmp")
        }
        XCTAssertEqual(leftovers, [], "no temporary file left behind")
    }

    func testDecryptAndExport() throws {
        let enc = try makePassphraseEncrypted()
        var result = try run(["decrypt", enc, path("plain-out.db"), "--key-env", "K"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(rowCount(path("plain-out.db"), key: nil), 50)
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: path("plain-out.db"))).contains(bytes: "MARKER-"))

        // A page size that is not the linked SQLCipher's default (1024 on 3.x, 4096 on 4.x).
        let pageSize = CipherFormat.linkedDefault == .v4 ? "8192" : "4096"
        result = try run(
            [
                "export", enc, path("exported.db"), "--key-env", "K", "--new-key-env", "N", "--new-cipher-page-size",
                pageSize,
            ],
            env: ["K": "k1", "N": "k2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        // The new page size is needed to open it, here and in the shell.
        result = try run(
            ["sql", path("exported.db"), "select count(*) from t", "--key-env", "N", "--cipher-page-size", pageSize],
            env: ["N": "k2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("50"))
        result = try run(["sql", path("exported.db"), "select count(*) from t", "--key-env", "N"], env: ["N": "k2"])
        XCTAssertEqual(result.status, 65, "without the page size the file does not open")
        let shell = try lineShell()
        let viaShell = try runSQLCipherShell(
            shell, path("exported.db"),
            "PRAGMA key='k2';\nPRAGMA cipher_page_size=\(pageSize);\nSELECT count(*) FROM t;\n")
        XCTAssertEqual(viaShell.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "50", viaShell.stderr)

        // --format 4: written on SQLCipher 4.x; refused with an explanation on 3.x, which cannot write it.
        result = try run(
            ["export", enc, path("v4.db"), "--key-env", "K", "--new-key-env", "N", "--format", "4"],
            env: ["K": "k1", "N": "k2"])
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(rowCount(path("v4.db"), key: "k2"), 50)
        } else {
            XCTAssertEqual(result.status, 64)
            XCTAssertTrue(result.stderr.contains("cipher_compatibility"), result.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("v4.db")))
        }
        // --format 3 on either line: the 3.4.1 shell's format (on 4.x: PRAGMA cipher_compatibility = 3).
        result = try run(
            ["export", enc, path("v3.db"), "--key-env", "K", "--new-key-env", "N", "--format", "3"],
            env: ["K": "k1", "N": "k2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let v3 = FMDatabase(path: path("v3.db"))
        XCTAssertTrue(v3.open())
        XCTAssertNoThrow(try v3.setKey(using: PassphraseKeyProvider("k2"), settings: CipherSettings(format: .v3)))
        XCTAssertEqual(v3.cipherFormat, .v3)
        XCTAssertEqual(v3.int(forQuery: "select count(*) from t"), 50)
        v3.close()
        result = try run(
            ["export", enc, path("v5.db"), "--key-env", "K", "--new-key-env", "N", "--format", "5"],
            env: ["K": "k1", "N": "k2"])
        XCTAssertEqual(result.status, 64)
    }

    func testRekeyWithBackup() throws {
        let enc = try makePassphraseEncrypted()
        let result = try run(
            ["rekey", enc, "--key-env", "OLD", "--new-key-env", "NEW", "--backup", path("backup.db")],
            env: ["OLD": "k1", "NEW": "k2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(rowCount(enc, key: "k2"), 50)
        XCTAssertNil(rowCount(enc, key: "k1"))
        XCTAssertEqual(rowCount(path("backup.db"), key: "k1"), 50, "the backup keeps the old key")
    }

    /// `rekey --backup` says each step when it is done, in order (the backup's figures, where it was written,
    /// the rekey's progress, the rekey); a backup that is refused stops it before the rekey starts.
    func testRekeyWithBackupSaysEachStepInOrderAndARefusedBackupStopsBeforeTheRekey() throws {
        let enc = try makePassphraseEncrypted()
        let backup = path("backup.db")
        XCTAssertTrue(FileManager.default.createFile(atPath: backup, contents: Data("keep".utf8)))
        let arguments = ["rekey", enc, "--key-env", "OLD", "--new-key-env", "NEW", "--backup", backup, "--progress"]
        let env = ["OLD": "k1", "NEW": "k2"]
        let refused = try run(arguments, env: env)
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("use --force"), refused.stderr)
        XCTAssertFalse(refused.stderr.contains("progress rekey"), "the rekey did not start: \(refused.stderr)")
        XCTAssertEqual(rowCount(enc, key: "k1"), 50, "not rekeyed")
        XCTAssertEqual(FileManager.default.contents(atPath: backup), Data("keep".utf8), "nothing replaced")

        let done = try run(arguments + ["--force"], env: env)
        XCTAssertEqual(done.status, 0, done.stderr)
        let said = [
            "backup: ", "backup written to \(backup)", "progress rekey 0 ", "progress rekey 100 ", "rekeyed \(enc)",
        ].map { done.stderr.range(of: $0)?.lowerBound }
        XCTAssertFalse(said.contains(nil), done.stderr)
        let positions = said.compactMap { $0 }
        XCTAssertEqual(positions, positions.sorted(), "each step said once done, in order: \(done.stderr)")
        XCTAssertEqual(rowCount(enc, key: "k2"), 50)
        XCTAssertEqual(rowCount(backup, key: "k1"), 50)
    }

    func testRekeyWithBothKeysOnStandardInputAndWALCheckpoint() throws {
        let enc = try makePassphraseEncrypted()
        let db = FMDatabase(path: enc)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("k1"))
        XCTAssertEqual(db.string(forQuery: "pragma journal_mode=wal"), "wal")
        db.close()
        let result = try run(["rekey", enc, "--key-stdin", "--new-key-stdin"], input: "k1\nk2\n")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(rowCount(enc, key: "k2"), 50)
        let wal = (try? FileManager.default.attributesOfItem(atPath: enc + "-wal"))?[.size] as? NSNumber
        XCTAssertEqual(wal?.intValue ?? 0, 0, "WAL checkpointed")
    }

    func testInfo() throws {
        let enc = try makePassphraseEncrypted()
        var result = try run(["info", enc])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("encrypted"), result.stdout)
        XCTAssertFalse(result.stdout.contains("tables"), "no key, no details")
        result = try run(["info", enc, "--key-env", "K", "--json"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let info = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(info["encrypted"] as? Bool, true)
        // The linked SQLCipher's version, as the library reads it, and its format's defaults: SQLCipher 3
        // (1024-byte pages, 64,000 iterations) or 4 (4096, 256,000).
        let v4 = CipherFormat.linkedDefault == .v4
        let probe = FMDatabase()
        XCTAssertTrue(probe.open())
        XCTAssertEqual(info["cipher_version"] as? String, try XCTUnwrap(probe.cipherVersion))
        probe.close()
        XCTAssertEqual(info["cipher_page_size"] as? Int, v4 ? 4096 : 1024)
        XCTAssertEqual(info["kdf_iter"] as? Int, v4 ? 256_000 : 64_000)
        XCTAssertEqual(info["user_version"] as? Int, 42)
        XCTAssertEqual(info["journal_mode"] as? String, "delete")
        let tables = try XCTUnwrap(info["tables"] as? [[String: Any]])
        XCTAssertEqual(tables.first?["name"] as? String, "t")
        XCTAssertEqual(tables.first?["rows"] as? Int, 50)
        result = try run(["info", try makeMarkedPlaintext("p2.db"), "--json"])
        let plain = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(plain["encrypted"] as? Bool, false)
    }

    func testCheck() throws {
        let enc = try makePassphraseEncrypted(key: "k1")
        var result = try run(["check", enc, "--key-env", "K"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "ok")
        result = try run(["check", enc, "--key-env", "K", "--json"], env: ["K": "k1"])
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(report["ok"] as? Bool, true)
        // Damage the last page: the page HMAC fails and check exits 2.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: enc))
        bytes[bytes.count - 100] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: enc))
        result = try run(["check", enc, "--key-env", "K"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 2, result.stdout + result.stderr)
    }

    func testSQLFormatsAndScriptFromStandardInput() throws {
        let enc = try makePassphraseEncrypted()
        var result = try run(
            ["sql", enc, "select id, v from t where id <= 2 order by id", "--key-env", "K"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "id  v\n--  --------\n1   MARKER-0\n2   MARKER-1\n")
        result = try run(
            ["sql", enc, "select id, v, b from t where id = 1; select 'a,\"b' as q", "--key-env", "K", "--csv"],
            env: ["K": "k1"])
        XCTAssertEqual(result.stdout, "id,v,b\n1,MARKER-0,x'00'\nq\n\"a,\"\"b\"\n")
        result = try run(
            ["sql", enc, "--key-stdin", "--json"],
            input: "k1\ncreate table u (x); insert into u values (1.5), (NULL);\nselect x from u order by x;\n")
        XCTAssertEqual(result.status, 0, result.stderr)
        let rows = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(rows.count, 2)
        XCTAssertTrue(rows[0]["x"] is NSNull)
        XCTAssertEqual(rows[1]["x"] as? Double, 1.5)
        result = try run(["sql", enc, "select nonsense from nowhere", "--key-env", "K"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("no such table"), result.stderr)
    }

    // MARK: - Key sources

    func testKeyFileWithTrailingNewlineAndOtherKDFs() throws {
        let plain = try makeMarkedPlaintext()
        try Data("file key\n".utf8).write(to: URL(fileURLWithPath: path("key.txt")))
        var result = try run(["encrypt", plain, path("f.db"), "--key-file", path("key.txt")])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(rowCount(path("f.db"), key: "file key"), 50, "one trailing newline stripped")
        for kdf in ["pbkdf2-sqlcipher", "pbkdf2", "scrypt"] {
            result = try run(
                ["encrypt", plain, path("\(kdf).db"), "--key-env", "K", "--kdf", kdf], env: ["K": "kdf key"])
            XCTAssertEqual(result.status, 0, "\(kdf): \(result.stderr)")
            result = try run(["check", path("\(kdf).db"), "--key-env", "K", "--kdf", kdf], env: ["K": "kdf key"])
            XCTAssertEqual(result.status, 0, "\(kdf): \(result.stderr)")
        }
        XCTAssertEqual(rowCount(path("pbkdf2-sqlcipher.db"), key: "kdf key"), 50, "pbkdf2-sqlcipher = the shell's KDF")
        let hex = String(repeating: "ab", count: 32)
        result = try run(["encrypt", plain, path("raw.db"), "--key-env", "K", "--kdf", "raw"], env: ["K": hex])
        XCTAssertEqual(result.status, 0, result.stderr)
        let shell = try lineShell()
        let viaShell = try runSQLCipherShell(
            shell, path("raw.db"), "PRAGMA key=\"x'\(hex)'\";\nSELECT count(*) FROM t;\n")
        XCTAssertEqual(viaShell.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "50")
        result = try run(
            ["encrypt", plain, path("raw2.db"), "--key-env", "K", "--kdf", "raw"], env: ["K": "too short"])
        XCTAssertEqual(result.status, 64, "a malformed raw key is a usage error")
        XCTAssertTrue(result.stderr.contains("32 bytes"), result.stderr)
        XCTAssertFalse(result.stderr.contains("too short"), "the key is never echoed")
    }

    func testKeysAreNeverTakenFromTheCommandLine() throws {
        let plain = try makeMarkedPlaintext()
        for flag in ["--key", "--passphrase", "--password"] {
            let result = try run(["encrypt", plain, path("x.db"), flag, "hunter2"])
            XCTAssertEqual(result.status, 64, flag)
            XCTAssertTrue(result.stderr.contains("--key-env"), result.stderr)
            XCTAssertFalse(result.stderr.contains("hunter2"), "the refused key is not echoed")
        }
        let enc = try makePassphraseEncrypted()
        let result = try run(["rekey", enc, "--key-env", "K", "--new-key", "hunter2"], env: ["K": "k1"])
        XCTAssertEqual(result.status, 64)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("x.db")))
    }

    func testNoKeyAndNoTerminalIsAUsageError() throws {
        let enc = try makePassphraseEncrypted()
        let result = try run(["check", enc])
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.stderr.contains("--key-env"), result.stderr)
    }

    // MARK: - Exit codes and bad input

    func testWrongKeyIs65AndChangesNothing() throws {
        let enc = try makePassphraseEncrypted()
        let before = try Data(contentsOf: URL(fileURLWithPath: enc))
        for args in [
            ["check", enc], ["sql", enc, "select 1"], ["rekey", enc, "--new-key-env", "N"],
            ["decrypt", enc, path("d.db")], ["info", enc],
        ] {
            let result = try run(args + ["--key-env", "K"], env: ["K": "wrong", "N": "new"])
            XCTAssertEqual(result.status, 65, "\(args[0]): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("wrong key"), result.stderr)
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: enc)), before)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("d.db")))
    }

    func testMissingFilesDirectoriesAndUnreadableKeyFilesAre66() throws {
        for args in [
            ["check", path("missing.db")], ["info", path("missing.db")], ["check", directory.url.path],
            ["encrypt", path("missing.db"), path("out.db")],
        ] {
            let result = try run(args + ["--key-env", "K"], env: ["K": "k"])
            XCTAssertEqual(result.status, 66, "\(args): \(result.stderr)")
        }
        let enc = try makePassphraseEncrypted()
        var result = try run(["check", enc, "--key-file", path("no-such-key-file")])
        XCTAssertEqual(result.status, 66, result.stderr)
        result = try run(["check", enc, "--key-file", directory.url.path])
        XCTAssertEqual(result.status, 66, result.stderr)
    }

    func testEmptyKeysAndUnsetVariablesAreUsageErrors() throws {
        let plain = try makeMarkedPlaintext()
        var result = try run(["encrypt", plain, path("e.db"), "--key-env", "EMPTY"], env: ["EMPTY": ""])
        XCTAssertEqual(result.status, 64)
        XCTAssertTrue(result.stderr.contains("empty"), result.stderr)
        result = try run(["encrypt", plain, path("e.db"), "--key-env", "FMDB_SURELY_UNSET_VARIABLE"])
        XCTAssertEqual(result.status, 64)
        try Data("\n".utf8).write(to: URL(fileURLWithPath: path("empty-key")))
        result = try run(["encrypt", plain, path("e.db"), "--key-file", path("empty-key")])
        XCTAssertEqual(result.status, 64)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("e.db")))
    }

    func testDestinationThatExistsIsRefusedUnlessForced() throws {
        let plain = try makeMarkedPlaintext()
        try Data("precious".utf8).write(to: URL(fileURLWithPath: path("dest.db")))
        var result = try run(["encrypt", plain, path("dest.db"), "--key-env", "K"], env: ["K": "k"])
        XCTAssertEqual(result.status, 73, result.stderr)
        XCTAssertEqual(try String(contentsOfFile: path("dest.db"), encoding: .utf8), "precious")
        result = try run(["encrypt", plain, path("dest.db"), "--key-env", "K", "--force"], env: ["K": "k"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(rowCount(path("dest.db"), key: "k"), 50)
        result = try run(["encrypt", plain, path("nodir/dest.db"), "--key-env", "K"], env: ["K": "k"])
        XCTAssertEqual(result.status, 73)
        result = try run(["encrypt", plain, plain, "--key-env", "K", "--force"], env: ["K": "k"])
        XCTAssertEqual(result.status, 64, "SRC and DEST must differ")
    }

    /// A `-wal` or `-journal` beside DEST would be applied by SQLite to the new file at its first open:
    /// refused even with --force, and nothing is written. A zeroed one (journal_mode PERSIST) is not.
    func testAJournalOrWALBesideDestIsRefusedEvenWithForce() throws {
        let plain = try makeMarkedPlaintext()
        let zeroed = path("zeroed.db")
        try Data(repeating: 0, count: 512).write(to: URL(fileURLWithPath: zeroed + "-journal"))
        XCTAssertEqual(
            try run(["encrypt", plain, zeroed, "--key-env", "K"], env: ["K": "k"]).status, 0,
            "a zeroed journal is not replayed")
        let headers: [String: [UInt8]] = [
            "-wal": [0x37, 0x7F, 0x06, 0x82, 0, 0x2D, 0xE2, 0x18],
            "-journal": [0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7],
        ]
        for suffix in ["-wal", "-journal"] {
            let dest = path("dest\(suffix).db")
            try Data("precious".utf8).write(to: URL(fileURLWithPath: dest))
            try Data((headers[suffix] ?? []) + Array("old frames".utf8)).write(to: URL(fileURLWithPath: dest + suffix))
            var result = try run(["encrypt", plain, dest, "--key-env", "K", "--force"], env: ["K": "k"])
            XCTAssertEqual(result.status, 75, result.stderr)
            XCTAssertTrue(result.stderr.contains("\(suffix): exists"), result.stderr)
            XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "precious")
            XCTAssertEqual(
                try Data(contentsOf: URL(fileURLWithPath: dest + suffix)).suffix(10), Data("old frames".utf8))
            // Without DEST: 73, and no DEST appears.
            try FileManager.default.removeItem(atPath: dest)
            result = try run(["encrypt", plain, dest, "--key-env", "K"], env: ["K": "k"])
            XCTAssertEqual(result.status, 73, result.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: dest))
            // Once it is gone, the copy goes through.
            try FileManager.default.removeItem(atPath: dest + suffix)
            result = try run(["encrypt", plain, dest, "--key-env", "K"], env: ["K": "k"])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(rowCount(dest, key: "k"), 50)
        }
        XCTAssertTrue(
            try FileManager.default.contentsOfDirectory(atPath: directory.url.path).allSatisfy {
                !$0.contains("fmdb-cipher-")
            },
            "no private directory left behind")
    }

    func testNonDatabaseAndTruncatedFiles() throws {
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(
            to: URL(fileURLWithPath: path("random.bin")))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path("short.bin")))
        let enc = try makePassphraseEncrypted()
        let truncated = try Data(contentsOf: URL(fileURLWithPath: enc)).prefix(1500)
        try truncated.write(to: URL(fileURLWithPath: path("truncated.db")))
        for file in ["random.bin", "short.bin", "truncated.db"] {
            for args in [
                ["check", path(file)], ["sql", path(file), "select * from t"],
                ["rekey", path(file), "--new-key-env", "K"],
                ["decrypt", path(file), path("out-\(file)")],
            ] {
                let result = try run(args + ["--key-env", "K"], env: ["K": "k1"])
                XCTAssertTrue([2, 65].contains(result.status), "\(args[0]) \(file): \(result.status) \(result.stderr)")
                XCTAssertFalse((result.stdout + result.stderr).isEmpty, "a reason is given")
                XCTAssertFalse(FileManager.default.fileExists(atPath: path("out-\(file)")))
            }
        }
        let plain = try makeMarkedPlaintext("p.db")
        let result = try run(["rekey", plain, "--key-env", "K", "--new-key-env", "K"], env: ["K": "k"])
        XCTAssertEqual(result.status, 65)
        XCTAssertTrue(result.stderr.contains("not encrypted"), result.stderr)
    }

    func testBusyDatabaseIs75() throws {
        let enc = try makePassphraseEncrypted()
        let holder = FMDatabase(path: enc)
        XCTAssertTrue(holder.open())
        try holder.setKey(using: PassphraseKeyProvider("k1"))
        XCTAssertTrue(holder.beginExclusiveTransaction())
        let result = try run(
            ["rekey", enc, "--key-env", "K", "--new-key-env", "N", "--busy-timeout", "0.2"],
            env: ["K": "k1", "N": "k2"])
        XCTAssertEqual(result.status, 75, result.stderr)
        XCTAssertTrue(holder.commit())
        holder.close()
        XCTAssertEqual(rowCount(enc, key: "k1"), 50, "still the old key")
    }

    func testUsageErrorsHelpAndVersion() throws {
        XCTAssertEqual(try run([]).status, 0, "no subcommand prints help")
        XCTAssertEqual(try run(["frobnicate"]).status, 64)
        XCTAssertEqual(try run(["encrypt"]).status, 64)
        XCTAssertEqual(
            try run(["sql", path("x.db"), "select 1", "--csv", "--json", "--key-env", "K"], env: ["K": "k"]).status, 64)
        for sub in ["rekey", "encrypt", "decrypt", "export", "info", "check", "sql"] {
            let help = try run([sub, "--help"])
            XCTAssertEqual(help.status, 0, sub)
            XCTAssertTrue(help.stdout.contains("Example"), "\(sub) --help shows examples")
            XCTAssertTrue(help.stdout.contains("--key-env"), sub)
        }
        let version = try run(["--version"])
        XCTAssertEqual(version.status, 0)
        // Names the linked SQLCipher, read at run time.
        let probe = FMDatabase()
        XCTAssertTrue(probe.open())
        let linked = try XCTUnwrap(probe.cipherVersion)
        probe.close()
        XCTAssertTrue(version.stdout.contains("SQLCipher \(linked)"), version.stdout)
        XCTAssertTrue(linked.hasPrefix("3.") || linked.hasPrefix("4."), linked)
        let help = try run(["--help"])
        // The help is wrapped to the terminal's width: compared with every line break as a space.
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(words.contains("75 database busy"), "exit codes are documented")
        XCTAssertTrue(words.contains("65 wrong key, or not a database"), "exit codes are documented")
    }

    // MARK: - Interop with the sqlcipher shell

    func testToolAndShellInterop() throws {
        let enc = try makePassphraseEncrypted(key: "shared")
        let shell = try lineShell()
        var viaShell = try runSQLCipherShell(shell, enc, "PRAGMA key='shared';\nSELECT count(*) FROM t;\n")
        XCTAssertEqual(viaShell.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "50", viaShell.stderr)
        let fromShell = path("shell.db")
        _ = try runSQLCipherShell(
            shell, fromShell, "PRAGMA key='shell key';\nCREATE TABLE t (a);\nINSERT INTO t VALUES (1);\n")
        let result = try run(
            ["rekey", fromShell, "--key-env", "K", "--new-key-env", "N"], env: ["K": "shell key", "N": "rotated"])
        XCTAssertEqual(result.status, 0, result.stderr)
        viaShell = try runSQLCipherShell(shell, fromShell, "PRAGMA key='rotated';\nSELECT count(*) FROM t;\n")
        XCTAssertEqual(viaShell.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "1", viaShell.stderr)
    }
}

/// Progress output and the worked key-rotation script.
final class FMDBCipherScriptTests: ToolTestCase {
    func makeBigPlaintext(rows: Int) throws -> String {
        let file = directory.path("big.db")
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v blob)"))
        XCTAssertTrue(db.beginTransaction())
        for _ in 0..<rows { XCTAssertTrue(db.executeUpdate("insert into t (v) values (randomblob(1000))")) }
        XCTAssertTrue(db.commit())
        db.close()
        return file
    }

    func testProgressOnlyOnATerminalAndNotWithQuiet() throws {
        let plain = try makeBigPlaintext(rows: 3000)
        var env = ProcessInfo.processInfo.environment
        env["K"] = "k"
        let piped = try runProcess(
            tool, ["encrypt", plain, directory.path("a.db"), "--key-env", "K"], environment: env)
        XCTAssertEqual(piped.status, 0, piped.stderr)
        XCTAssertFalse(piped.stderr.contains("%"), "no progress when stderr is not a terminal")
        // `script` gives the tool a terminal.
        let script = try XCTUnwrap(which("script"))
        let command = "\(tool!) encrypt \(plain) \(directory.path("b.db")) --key-env K"
        let tty = try runProcess(script, ["-qec", command, "/dev/null"], environment: env)
        XCTAssertEqual(tty.status, 0, tty.stdout + tty.stderr)
        XCTAssertTrue(tty.stdout.contains("encrypt ["), "a progress bar on a terminal: \(tty.stdout)")
        let quiet = try runProcess(
            script, ["-qec", command.replacingOccurrences(of: "b.db", with: "c.db") + " --quiet", "/dev/null"],
            environment: env)
        XCTAssertEqual(quiet.status, 0)
        XCTAssertFalse(quiet.stdout.contains("encrypt ["), "--quiet: no progress")
    }

    func testRotateKeyScript() throws {
        let plain = try makeBigPlaintext(rows: 10)
        var env = ProcessInfo.processInfo.environment
        env["K"] = "old"
        XCTAssertEqual(
            try runProcess(
                tool, ["encrypt", plain, directory.path("app.db"), "--key-env", "K", "--quiet"], environment: env
            ).status, 0)
        let scriptPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/rotate-key").path
        env["FMDB_CIPHER"] = tool
        env["OLD_DB_KEY"] = "old"
        env["NEW_DB_KEY"] = "new"
        let result = try runProcess("/bin/bash", [scriptPath, directory.path("app.db")], environment: env)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("rotated"), result.stderr)
        env["K"] = "new"
        XCTAssertEqual(
            try runProcess(tool, ["check", directory.path("app.db"), "--key-env", "K"], environment: env).status, 0)
        let backups = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter {
            $0.hasSuffix(".bak")
        }
        XCTAssertEqual(backups.count, 1)
        let backup = try XCTUnwrap(backups.first)
        env["K"] = "old"
        XCTAssertEqual(
            try runProcess(tool, ["check", directory.path(backup), "--key-env", "K"], environment: env).status, 0)
        // With the wrong old key the script stops before touching the database.
        env["OLD_DB_KEY"] = "wrong"
        let failed = try runProcess("/bin/bash", [scriptPath, directory.path("app.db")], environment: env)
        XCTAssertEqual(failed.status, 65)
    }

    func testNoEchoPromptOnATerminal() throws {
        let plain = try makeBigPlaintext(rows: 5)
        // Each answer is typed once its prompt shows with echo off (type-ahead is flushed when echo is turned
        // off, as getpass does).
        func run(_ arguments: [String], answers: [String]) throws -> (status: Int32, output: String) {
            let result = try runOnTerminal([tool] + arguments, answers: answers)
            return (result.status, result.output)
        }
        let dest = directory.path("prompted.db")
        var result = try run(["encrypt", plain, dest, "--quiet"], answers: ["typed-secret", "typed-secret"])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("Repeat key"), "a new key is asked twice: \(result.output)")
        XCTAssertFalse(result.output.contains("typed-secret"), "the key is not echoed: \(result.output)")
        result = try run(["check", dest], answers: ["typed-secret"])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("ok"))
        // Two entries that differ are asked for again, up to three times.
        result = try run(
            ["encrypt", plain, directory.path("again.db"), "--quiet"], answers: ["one", "two", "three", "three"])
        XCTAssertEqual(result.status, 0, "asked again after a mismatch: \(result.output)")
        XCTAssertTrue(result.output.contains("differ; type it again"), result.output)
        result = try run(["check", directory.path("again.db")], answers: ["three"])
        XCTAssertEqual(result.status, 0, "the second pair is the key: \(result.output)")
        result = try run(
            ["encrypt", plain, directory.path("other.db")], answers: ["one", "two", "three", "four", "five", "six"])
        XCTAssertEqual(result.status, 64, "the two entries differ three times: \(result.output)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.path("other.db")))
    }
}
