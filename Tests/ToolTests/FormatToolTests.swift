import FMDB
import Foundation
import TestSupport
import XCTest

/// `fmdb-cipher` and SQLCipher file formats, end to end on the binary, on whichever line it is linked
/// with: `migrate`, `info`'s format line, `export --format`, and a SQLCipher 4 file on SQLCipher 3 (exit 69).
final class FormatToolTests: ToolTestCase {
    @discardableResult
    func runKeyed(_ arguments: [String], key: String = "format key") throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try run(arguments, env: ["K": key])
    }

    /// An encrypted database in `format`, with 20 rows, made by the library.
    func makeDatabase(_ name: String, format: CipherFormat, key: String = "format key") throws -> String {
        try makeKeyedDatabase(name, provider: PassphraseKeyProvider(key), settings: CipherSettings(format: format)) {
            db in
            XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text)"))
            for i in 0..<20 { XCTAssertTrue(db.executeUpdate("insert into t (v) values (?)", "row \(i)")) }
        }
    }

    /// A SQLCipher 3 database of `makeDatabase`'s 20 rows in WAL mode, with a 21st row still only in its
    /// -wal, and the open connection that holds it there (the caller closes it).
    func makeWALDatabase(_ name: String) throws -> (path: String, connection: FMDatabase) {
        let file = try makeDatabase(name, format: .v3)
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("format key"), settings: CipherSettings(format: .v3))
        XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = WAL"), "wal")
        XCTAssertTrue(db.executeUpdate("insert into t (v) values ('in the wal')"))
        return (file, db)
    }

    func format(_ file: String, key: String = "format key") throws -> String? {
        let result = try runKeyed(["info", file, "--key-env", "K", "--json"], key: key)
        XCTAssertEqual(result.status, 0, result.stderr)
        let info = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        return info["format"] as? String
    }

    func testInfoNamesTheFormat() throws {
        let current = try makeDatabase("current.db", format: .linkedDefault)
        XCTAssertEqual(try format(current), CipherFormat.linkedDefault.description)
        let older = try makeDatabase("older.db", format: .v2)
        XCTAssertEqual(try format(older), "SQLCipher 2")
        let text = try runKeyed(["info", older, "--key-env", "K"])
        XCTAssertTrue(text.stdout.contains("format: SQLCipher 2"), text.stdout)
    }

    /// In place, SRC is replaced only when no other process has it open: that process would go on writing
    /// to the replaced file, and a write it acknowledged after the copy would be lost. Rollback-journal
    /// mode, where an idle connection leaves no side file.
    func testMigrateInPlaceRefusesWhileAnotherProcessHasTheDatabaseOpen() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { throw XCTSkip("migrate needs SQLCipher 4 linked") }
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"), "build the fmdb-test-helper product first")
        let hex = String(repeating: "5c", count: 32)
        let file = path("busy.db")
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        try db.setKey(
            using: RawKeyProvider(key: Data(repeating: 0x5C, count: 32)), settings: CipherSettings(format: .v3))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE acks (n INTEGER PRIMARY KEY, payload BLOB, note TEXT)"))
        db.close()

        // A writer that commits and acknowledges transactions, with the database open throughout.
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: helper)
        writer.arguments = ["writer", file, "delete", hex]
        let acks = Pipe()
        writer.standardOutput = acks
        try writer.run()
        defer { if writer.isRunning { writer.terminate() } }
        var acknowledged = ""
        while !acknowledged.contains("\n3\n") {
            let data = acks.fileHandleForReading.availableData
            guard !data.isEmpty else { return XCTFail("the writer ended: \(writer.terminationStatus)") }
            acknowledged += String(decoding: data, as: UTF8.self)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = hex
        let refused = try runProcess(
            tool, ["migrate", file, "--kdf", "raw", "--key-env", "K", "--quiet"], input: "",
            environment: environment)
        XCTAssertEqual(refused.status, 75, refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains("open in another process (pid \(writer.processIdentifier)"), refused.stderr)
        // The tool's own way out, added by the failure's kind.
        XCTAssertTrue(
            refused.stderr.contains("`fmdb-cipher migrate \(file) DEST` migrates into a new file"), refused.stderr)
        writer.terminate()
        writer.waitUntilExit()
        acknowledged += String(decoding: acks.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let last = try XCTUnwrap(acknowledged.split(separator: "\n").compactMap { Int($0) }.max())

        // Nobody has it open now. The writer may have stopped mid-transaction: an open rolls its journal back
        // (migrate refuses a file with a leftover journal, and says so).
        let check = FMDatabase(path: file)
        XCTAssertTrue(check.open())
        try check.setKey(using: RawKeyProvider(key: Data(repeating: 0x5C, count: 32)))
        XCTAssertNotNil(check.string(forQuery: "SELECT count(*) FROM acks"))
        check.close()
        // Migrated, and every acknowledged transaction is in the new file.
        let migrated = try runProcess(
            tool, ["migrate", file, "--kdf", "raw", "--key-env", "K", "--quiet"], input: "",
            environment: environment)
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        let reader = FMDatabase(path: file)
        XCTAssertTrue(reader.open())
        defer { reader.close() }
        try reader.setKey(using: RawKeyProvider(key: Data(repeating: 0x5C, count: 32)))
        XCTAssertEqual(reader.cipherFormat, .v4)
        XCTAssertGreaterThanOrEqual(Int(reader.int(forQuery: "SELECT max(n) FROM acks")), last)
    }

    /// A WAL source is migrated in place through a rollback journal: nothing of the old WAL is left beside
    /// the new file, and every row is there.
    func testMigrateInPlaceOfAWALDatabaseLeavesNoSideFiles() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { throw XCTSkip("migrate needs SQLCipher 4 linked") }
        let (file, db) = try makeWALDatabase("wal.db")
        db.close()
        let result = try runKeyed(["migrate", file, "--key-env", "K", "--quiet"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try format(file), "SQLCipher 4")
        for suffix in ["-wal", "-shm", "-journal"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: file + suffix), suffix)
        }
        let reader = FMDatabase(path: file)
        XCTAssertTrue(reader.open())
        defer { reader.close() }
        try reader.setKey(using: PassphraseKeyProvider("format key"))
        XCTAssertEqual(reader.int(forQuery: "select count(*) from t"), 21)
    }

    /// A -wal a stopped process left beside SRC (no process has it open) is applied, not lost: migrate in
    /// place reads it under SRC's write lock, switches SRC out of WAL (which checkpoints it) and upgrades
    /// every row, the one only the -wal held included.
    func testMigrateInPlaceAppliesAWALAStoppedProcessLeft() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { throw XCTSkip("migrate needs SQLCipher 4 linked") }
        let (live, db) = try makeWALDatabase("live.db")
        // The files as a process killed now would leave them: the database and its -wal, no process.
        let file = path("stopped.db")
        try FileManager.default.copyItem(atPath: live, toPath: file)
        try FileManager.default.copyItem(atPath: live + "-wal", toPath: file + "-wal")
        db.close()

        let result = try runKeyed(["migrate", file, "--key-env", "K", "--quiet"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try format(file), "SQLCipher 4")
        let rows = try runKeyed(["sql", file, "select count(*) from t", "--read-only", "--key-env", "K", "--csv"])
        XCTAssertEqual(rows.stdout.split(separator: "\n").last, "21", rows.stderr)
        for suffix in ["-wal", "-shm", "-journal"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: file + suffix), suffix)
        }
    }

    func testMigrateUpgradesInPlaceAndIntoDestOrRefusesClearly() throws {
        let old = try makeDatabase("old.db", format: .v3)
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            let before = try Data(contentsOf: URL(fileURLWithPath: old))
            let result = try runKeyed(["migrate", old, "--key-env", "K"])
            XCTAssertEqual(result.status, 64, "SQLCipher 3 cannot write the new format")
            XCTAssertTrue(result.stderr.contains("Scripts/install --sqlcipher 4"), result.stderr)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: old)), before)
            return
        }
        // Into DEST: SRC untouched.
        let before = try Data(contentsOf: URL(fileURLWithPath: old))
        var result = try runKeyed(["migrate", old, path("new.db"), "--key-env", "K", "--quiet"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: old)), before, "SRC unchanged")
        XCTAssertEqual(try format(path("new.db")), "SQLCipher 4")
        result = try runKeyed(["migrate", old, path("new.db"), "--key-env", "K", "--quiet"])
        XCTAssertEqual(result.status, 73, "DEST exists")
        // In place.
        result = try runKeyed(["migrate", old, "--key-env", "K"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("SQLCipher 3") && result.stderr.contains("(SQLCipher 4)"), result.stderr)
        XCTAssertEqual(try format(old), "SQLCipher 4")
        let check = try runKeyed(["check", old, "--key-env", "K", "--json"])
        XCTAssertEqual(check.status, 0, check.stderr)
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(check.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(report["cipher_integrity_check"] as? String, "ok", "SQLCipher 4's HMAC check of every page ran")
        let sql = try runKeyed(["sql", old, "select count(*) from t", "--key-env", "K", "--csv"])
        XCTAssertTrue(sql.stdout.contains("20"), sql.stdout)
        // Again: nothing to do. No staging file is left beside it.
        result = try runKeyed(["migrate", old, "--key-env", "K"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("already"), result.stderr)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter {
            $0.contains("fmdb-cipher-")
        }
        XCTAssertEqual(leftovers, [])
    }

    func testCheckReportsPagesThatFailTheirHMACOnSQLCipher4() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            throw XCTSkip("PRAGMA cipher_integrity_check is SQLCipher 4's")
        }
        let file = path("pages.db")
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("format key"))
        XCTAssertTrue(db.executeUpdate("create table t (v text)"))
        for i in 0..<200 {
            XCTAssertTrue(db.executeUpdate("insert into t values (?)", String(repeating: "x", count: 100) + "\(i)"))
        }
        db.close()
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        XCTAssertGreaterThan(bytes.count, 3 * 4096)
        bytes[2 * 4096 + 100] ^= 0x01  // page 3
        try bytes.write(to: URL(fileURLWithPath: file))
        let result = try runKeyed(["check", file, "--key-env", "K"])
        XCTAssertEqual(result.status, 2, result.stderr)
        XCTAssertTrue(result.stdout.contains("page 3"), result.stdout)
    }

    func testMigrateBadInput() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            throw XCTSkip("migrate needs SQLCipher 4 (tested above on 3.x)")
        }
        // A plaintext file, a wrong key, a missing file: clear errors, SRC unchanged.
        let plain = path("plain.db")
        let db = FMDatabase(path: plain)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        db.close()
        let plainBefore = try Data(contentsOf: URL(fileURLWithPath: plain))
        var result = try runKeyed(["migrate", plain, "--key-env", "K"])
        XCTAssertEqual(result.status, 65)
        XCTAssertTrue(result.stderr.contains("plaintext"), result.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: plain)), plainBefore)

        let old = try makeDatabase("old.db", format: .v3)
        let oldBefore = try Data(contentsOf: URL(fileURLWithPath: old))
        result = try runKeyed(["migrate", old, "--key-env", "K"], key: "wrong key")
        XCTAssertEqual(result.status, 65)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: old)), oldBefore)
        result = try runKeyed(["migrate", path("missing.db"), "--key-env", "K"])
        XCTAssertEqual(result.status, 66)
    }

    func testSQLCipher4FileOnSQLCipher3ExitsWith69AndInfoNamesTheFormat() throws {
        guard !CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            throw XCTSkip("SQLCipher 4 is linked: such files open (CipherFormatTests)")
        }
        guard let shell = ProcessInfo.processInfo.environment["FMDB_SQLCIPHER4_SHELL"] else {
            throw XCTSkip("FMDB_SQLCIPHER4_SHELL is not set (Scripts/test sets it)")
        }
        let file = path("v4.db")
        let made = try runSQLCipherShell(
            shell, file, "PRAGMA key = 'format key';\nCREATE TABLE t (a);\nINSERT INTO t VALUES (1);\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        var result = try runKeyed(["info", file, "--key-env", "K", "--json"])
        XCTAssertEqual(result.status, 69, result.stderr)
        let info = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(info["format"] as? String, "SQLCipher 4")
        XCTAssertTrue(result.stderr.contains("the key is right"), result.stderr)
        XCTAssertTrue(
            result.stderr.contains("Scripts/install --sqlcipher 4"), "the command that gets a tool that opens it")
        result = try runKeyed(["sql", file, "select 1", "--key-env", "K"])
        XCTAssertEqual(result.status, 69)
        XCTAssertTrue(result.stderr.contains("Scripts/install --sqlcipher 4"), result.stderr)
        result = try runKeyed(["info", file, "--key-env", "K"], key: "wrong key")
        XCTAssertEqual(result.status, 65, "a wrong key is still exit 65")
    }
}
