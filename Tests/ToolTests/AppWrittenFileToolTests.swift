import FMDB
import Foundation
import TestSupport
import XCTest

/// Files real apps write, read with the tool as the app that wrote them would: full-text and R-tree tables
/// under `--read-only`, `info` and `check`, raw keys given with their salt, and formats SQLCipher cannot
/// check page by page. Files whose format is the claim come from the `sqlcipher` shell
/// (FMDB_SQLCIPHER3_SHELL); without it those tests skip, saying so.
final class AppWrittenFileToolTests: ToolTestCase {
    func shell3() throws -> String {
        try shell("FMDB_SQLCIPHER3_SHELL")
    }

    /// The shell of the linked SQLCipher's line, which reads the files the tool writes by default.
    func linkedLineShell() throws -> String {
        try shell(CipherFormat.linkedDefault == .v4 ? "FMDB_SQLCIPHER4_SHELL" : "FMDB_SQLCIPHER3_SHELL")
    }

    func shell(_ variable: String) throws -> String {
        guard let shell = ProcessInfo.processInfo.environment[variable],
            FileManager.default.isExecutableFile(atPath: shell)
        else { throw XCTSkip("\(variable) (a sqlcipher shell) is not set") }
        return shell
    }

    /// A keyed database with an FTS4 and an R-tree table (an app's search index and map tiles) reads in
    /// every command that opens it to read only.
    func testFullTextAndRTreeDatabasesReadInReadOnlyInfoAndCheck() throws {
        let file = path("search.db")
        let made = try run(
            [
                "sql", file,
                "CREATE TABLE notes (a); INSERT INTO notes VALUES ('n'); "
                    + "CREATE VIRTUAL TABLE idx USING fts4(body); INSERT INTO idx VALUES ('hello world'); "
                    + "CREATE VIRTUAL TABLE tiles USING rtree(id, x0, x1); INSERT INTO tiles VALUES (1, 2, 3)",
                "--key-env", "K", "--create",
            ], env: ["K": "app key"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        for query in ["SELECT count(*) FROM idx WHERE idx MATCH 'hello'", "SELECT count(*) FROM tiles WHERE x0 >= 1"] {
            let read = try run(["sql", file, query, "--key-env", "K", "--read-only", "--csv"], env: ["K": "app key"])
            XCTAssertEqual(read.status, 0, "\(query): \(read.stderr)")
            XCTAssertTrue(read.stdout.contains("1"), read.stdout)
        }
        let write = try run(
            ["sql", file, "INSERT INTO idx VALUES ('x')", "--key-env", "K", "--read-only"], env: ["K": "app key"])
        XCTAssertEqual(write.status, 1, write.stderr)
        XCTAssertTrue(write.stderr.contains("answers queries only"), write.stderr)
        let info = try run(["info", file, "--key-env", "K", "--json"], env: ["K": "app key"])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertTrue(info.stdout.contains("\"idx\""), info.stdout)
        let check = try run(["check", file, "--key-env", "K"], env: ["K": "app key"])
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), before, "reading changed nothing")
    }

    /// `--kdf raw` takes the key as SQLCipher's `PRAGMA key` does: 64 hexadecimal digits, or 96 (the key, then
    /// the salt), bare or as `x'…'`. A file the shell wrote with a raw key and salt opens with each form.
    func testRawKeyWithItsSaltOpensAShellFileInEveryForm() throws {
        let shell = try shell3()
        let key = String(repeating: "3c", count: 32)
        let salt = "00112233445566778899aabbccddeeff"
        let file = path("rawsalt.db")
        let made = try runSQLCipherShell(
            shell, file, "PRAGMA key = \"x'\(key)\(salt)'\";\nCREATE TABLE t (a);\nINSERT INTO t VALUES (7);\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        // The shell wrote the salt it was given as the file's first 16 bytes.
        let head = try XCTUnwrap(FileHandle(forReadingAtPath: file)).readData(ofLength: 16)
        XCTAssertEqual(head.map { String(format: "%02x", $0) }.joined(), salt)
        for given in [key + salt, "x'\(key)\(salt)'", "X'\(key)\(salt)'", "x'\(key)'", key] {
            let read = try run(
                ["sql", file, "SELECT a FROM t", "--kdf", "raw", "--key-env", "K", "--csv"], env: ["K": given])
            XCTAssertEqual(read.status, 0, "\(given.count) characters: \(read.stderr)")
            XCTAssertEqual(read.stdout.split(separator: "\n").last, "7", read.stdout)
        }
        for bad in [key + "0", "x'\(key)\(salt)0'", "x'\(key)\(salt.dropLast(2))zz'", "x'\(key)"] {
            let read = try run(["sql", file, "SELECT a FROM t", "--kdf", "raw", "--key-env", "K"], env: ["K": bad])
            XCTAssertEqual(read.status, 64, "\(bad.count) characters: \(read.stderr)")
            XCTAssertTrue(read.stderr.contains("raw key"), read.stderr)
            XCTAssertFalse(read.stderr.contains(key), "the key is never echoed: \(read.stderr)")
            XCTAssertFalse(read.stderr.contains(salt.dropLast(2)), "nor the salt: \(read.stderr)")
        }
    }

    /// SQLCipher 1's format has no page HMACs: where the linked SQLCipher has `cipher_integrity_check`, it
    /// declines such a file, which is no damage: exit 0 when SQLite's own check is clean, saying which check ran.
    func testCheckOfAFormatWithoutPageHMACsIsNotDamage() throws {
        let shell = try shell3()
        let file = path("v1.db")
        let made = try runSQLCipherShell(
            shell, file,
            "PRAGMA key = 'old app';\nPRAGMA cipher_use_hmac = OFF;\nPRAGMA kdf_iter = 4000;\n"
                + "CREATE TABLE t (a);\nINSERT INTO t VALUES (1);\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        let check = try run(["check", file, "--key-env", "K", "--json"], env: ["K": "old app"])
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertTrue(check.stdout.contains("\"ok\" : true") || check.stdout.contains("\"ok\":true"), check.stdout)
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            XCTAssertTrue(
                check.stderr.contains(
                    "integrity checked by SQLite; SQLCipher's page check is not available for this format"),
                check.stderr)
            XCTAssertTrue(check.stdout.contains("not available for this format"), check.stdout)
        }
    }
}

extension AppWrittenFileToolTests {
    /// A new file written weaker than SQLCipher's default (no page HMACs; SHA1 where SQLCipher 4 lets an app
    /// choose) is written, with a warning saying so; a default one gets none.
    func testAWeakerNewFileIsWrittenWithAWarning() throws {
        let plain = try makePlaintext("weak-plain.db", rows: 1)
        let env = ["K": "app key"]
        let plainly = try run(["encrypt", plain, path("default.db"), "--key-env", "K"], env: env)
        XCTAssertEqual(plainly.status, 0, plainly.stderr)
        XCTAssertFalse(plainly.stderr.contains("weaker"), plainly.stderr)
        let noHMAC = try run(
            ["encrypt", plain, path("nohmac.db"), "--key-env", "K", "--new-cipher-use-hmac", "off"], env: env)
        XCTAssertEqual(noHMAC.status, 0, noHMAC.stderr)
        XCTAssertTrue(noHMAC.stderr.contains("pages can be altered undetected"), noHMAC.stderr)
        let created = try run(
            ["sql", path("created.db"), "--create", "--key-env", "K", "--cipher-use-hmac", "off", "CREATE TABLE t(a)"],
            env: env)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertTrue(created.stderr.contains("pages can be altered undetected"), created.stderr)
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { return }
        let sha1 = try run(
            [
                "encrypt", plain, path("sha1.db"), "--key-env", "K", "--new-cipher-hmac-algorithm", "sha1",
                "--new-cipher-kdf-algorithm", "sha1",
            ], env: env)
        XCTAssertEqual(sha1.status, 0, sha1.stderr)
        XCTAssertTrue(sha1.stderr.contains("HMAC-SHA1 pages, weaker"), sha1.stderr)
        XCTAssertTrue(sha1.stderr.contains("PBKDF2-HMAC-SHA1, weaker"), sha1.stderr)
    }

    /// A plaintext header without its salt is a usage error before anything is written: SQLCipher would pick
    /// a random salt the file does not hold, and the new file could never be opened.
    func testAPlaintextHeaderWithoutItsSaltWritesNothing() throws {
        let file = path("header-without-salt.db")
        let made = try run(
            ["sql", file, "--create", "--key-env", "K", "--cipher-plaintext-header-size", "32", "CREATE TABLE t(a)"],
            env: ["K": "app key"])
        XCTAssertEqual(made.status, 64, made.stderr)
        XCTAssertTrue(made.stderr.contains("--cipher-salt"), made.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "nothing was written")
        let plain = try makePlaintext("header-plain.db", rows: 1)
        let encrypted = path("header-new.db")
        let written = try run(
            ["encrypt", plain, encrypted, "--key-env", "K", "--new-cipher-plaintext-header-size", "32"],
            env: ["K": "app key"])
        XCTAssertEqual(written.status, 64, written.stderr)
        XCTAssertTrue(written.stderr.contains("--new-cipher-salt"), written.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: encrypted), "nothing was written")
    }

    /// `cipher_use_hmac = OFF` with SQLCipher's other defaults is no format of its own: the file opens with
    /// `--cipher-use-hmac off`, and only with it. Choices the linked SQLCipher lacks are refused naming the one
    /// that has them (exit 69); malformed ones are usage errors.
    func testAppChosenSettingsOpenTheFileAndBadOnesAreRefused() throws {
        let shell = try shell3()
        let file = path("nohmac.db")
        let made = try runSQLCipherShell(
            shell, file,
            "PRAGMA key = 'app key';\nPRAGMA cipher_use_hmac = OFF;\nCREATE TABLE t (a);\nINSERT INTO t VALUES (5);\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        let query = ["sql", file, "SELECT a FROM t", "--key-env", "K", "--csv"]
        let bare = try run(query, env: ["K": "app key"])
        XCTAssertEqual(bare.status, 65, bare.stderr)
        let given = try run(query + ["--cipher-use-hmac", "off"], env: ["K": "app key"])
        XCTAssertEqual(given.status, 0, given.stderr)
        XCTAssertEqual(given.stdout.split(separator: "\n").last, "5", given.stdout)
        let info = try run(["info", file, "--key-env", "K", "--cipher-use-hmac", "off"], env: ["K": "app key"])
        XCTAssertEqual(info.status, 0, info.stderr)

        let salt = ["--cipher-salt", String(repeating: "ab", count: 16)]
        for flags in [
            ["--cipher-hmac-algorithm", "HMAC_SHA256"], ["--cipher-kdf-algorithm", "pbkdf2_hmac_sha1"],
            ["--cipher-plaintext-header-size", "32"] + salt, salt,
        ] {
            let result = try run(query + flags, env: ["K": "app key"])
            if CipherFormat.v4.isSupportedByLinkedSQLCipher {
                XCTAssertNotEqual(result.status, 69, "\(flags): \(result.stderr)")
            } else {
                XCTAssertEqual(result.status, 69, "\(flags): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains("SQLCipher 4"), result.stderr)
            }
        }
        for (flag, value) in [
            ("--cipher-hmac-algorithm", "MD5"), ("--cipher-use-hmac", "maybe"),
            ("--cipher-plaintext-header-size", "33"), ("--cipher-salt", "x'0011'"),
        ] {
            let result = try run(query + [flag, value], env: ["K": "app key"])
            XCTAssertEqual(result.status, 64, "\(flag) \(value): \(result.stderr)")
        }
    }
}

extension AppWrittenFileToolTests {
    /// The settings of a file a command writes take the same names with `new-` in front, and the note says the
    /// flags that open it: a file written without page HMACs opens in the shell with `cipher_use_hmac = OFF`.
    func testNewFileChoicesAreWrittenAndSaidBack() throws {
        let shell = try linkedLineShell()
        let plain = try makePlaintext("apps-plain.db", rows: 3)
        let file = path("written-nohmac.db")
        let made = try run(
            ["encrypt", plain, file, "--key-env", "K", "--new-cipher-use-hmac", "off"], env: ["K": "new app key"])
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertTrue(made.stderr.contains("--cipher-use-hmac off"), made.stderr)
        let viaShell = try runSQLCipherShell(
            shell, file, "PRAGMA key = 'new app key';\nPRAGMA cipher_use_hmac = OFF;\nSELECT count(*) FROM t;\n")
        XCTAssertEqual(viaShell.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "3", viaShell.stderr)
        let copy = path("copy-nohmac.db")
        let exported = try run(
            [
                "export", file, copy, "--key-env", "K", "--cipher-use-hmac", "off", "--new-key-env", "N",
                "--new-cipher-use-hmac", "off", "--json",
            ], env: ["K": "new app key", "N": "other key"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertTrue(exported.stdout.contains("\"--cipher-use-hmac\""), exported.stdout)
        let read = try run(
            ["sql", copy, "SELECT count(*) FROM t", "--key-env", "N", "--cipher-use-hmac", "off", "--csv"],
            env: ["N": "other key"])
        XCTAssertEqual(read.status, 0, read.stderr)
        XCTAssertEqual(read.stdout.split(separator: "\n").last, "3", read.stdout)
        if !CipherFormat.v4.isSupportedByLinkedSQLCipher {
            let refused = try run(
                ["encrypt", plain, path("sha256.db"), "--key-env", "K", "--new-cipher-hmac-algorithm", "HMAC_SHA256"],
                env: ["K": "new app key"])
            XCTAssertEqual(refused.status, 69, refused.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("sha256.db")), "nothing was written")
        }
    }
}
