@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Interop with Python's SQLCipher binding from PyPI (`sqlcipher3-binary`: `sqlcipher3` with SQLCipher 4
/// built in, the way most Python programs get it). Scripts/test installs it into a venv and sets
/// FMDB_SQLCIPHER_PYTHON; without it the tests try `pip install` into a temporary venv, and skip, saying
/// why, when PyPI cannot be reached. Keys go to Python on standard input, never on its command line.
final class PythonInteropTests: FMDBCipherTestCase {
    var python: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        python = try Self.pythonWithSQLCipher(directory)
    }

    static func pythonWithSQLCipher(_ directory: TemporaryDirectory) throws -> String {
        if let configured = ProcessInfo.processInfo.environment["FMDB_SQLCIPHER_PYTHON"],
            FileManager.default.isExecutableFile(atPath: configured)
        {
            return configured
        }
        guard let python3 = which("python3") else { throw XCTSkip("python3 is not installed") }
        let venv = directory.path("venv")
        let made = try runProcess(python3, ["-m", "venv", venv])
        guard made.status == 0 else {
            throw XCTSkip("python3 -m venv failed (apt-get install python3-venv): \(made.stderr)")
        }
        let pip = try runProcess(
            venv + "/bin/pip", ["install", "--quiet", "--disable-pip-version-check", "sqlcipher3-binary"])
        guard pip.status == 0 else {
            throw XCTSkip("pip install sqlcipher3-binary failed (PyPI unreachable?): \(pip.stderr)")
        }
        return venv + "/bin/python"
    }

    /// Runs `script` in Python with `path` as argv[1] and the key as the first line of standard input.
    func python(_ script: String, path: String, key: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let program =
            "import sys, sqlcipher3\nkey = sys.stdin.readline().rstrip('\\n').replace(\"'\", \"''\")\n"
            + "db = sqlcipher3.connect(sys.argv[1])\ndb.execute(\"PRAGMA key = '\" + key + \"'\")\n" + script
        let file = directory.path("script.py")
        try program.write(toFile: file, atomically: true, encoding: .utf8)
        return try runProcess(python, [file, path], input: key + "\n")
    }

    func testPythonFileOpensHereOrIsToldApartOnSQLCipher3() throws {
        let path = directory.path("python.db")
        let made = try python(
            """
            db.execute("CREATE TABLE t (a TEXT)")
            db.execute("INSERT INTO t VALUES ('from python')")
            db.commit()
            print(db.execute("PRAGMA cipher_version").fetchone()[0])
            """, path: path, key: "py passphrase")
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertTrue(made.stdout.hasPrefix("4."), made.stdout)
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            try db.setKey(using: PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "py passphrase"))
            XCTAssertEqual(db.cipherFormat, .v4)
            XCTAssertEqual(db.string(forQuery: "select a from t"), "from python")
        } else {
            XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("py passphrase"))) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_FORMAT))
            }
        }
    }

    func testFileMadeHereOpensInPython() throws {
        let path = directory.path("here.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("lib passphrase"))
        XCTAssertTrue(db.executeUpdate("create table t (a text)"))
        XCTAssertTrue(db.executeUpdate("insert into t values ('from FMDB')"))
        db.close()
        let select = "print(db.execute('SELECT a FROM t').fetchone()[0])\n"
        if CipherFormat.linkedDefault == .v4 {
            let read = try python(select, path: path, key: "lib passphrase")
            XCTAssertEqual(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "from FMDB", read.stderr)
        } else {
            // A SQLCipher 3 file: Python's SQLCipher 4 needs the compatibility setting, and fails without it.
            let plain = try python(select, path: path, key: "lib passphrase")
            XCTAssertNotEqual(plain.status, 0)
            XCTAssertTrue(plain.stderr.contains("not a database"), plain.stderr)
            let compat = try python(
                "db.execute('PRAGMA cipher_compatibility = 3')\n" + select, path: path, key: "lib passphrase")
            XCTAssertEqual(compat.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "from FMDB", compat.stderr)
        }
    }
    /// Apps choose SQLCipher 4 settings (page size, KDF iterations, HMAC and KDF algorithms): with
    /// CipherSettings saying so, such a file opens on SQLCipher 4; on SQLCipher 3 the right key is told apart
    /// from a wrong one (code 24, which the tool reports as exit 69), never taken for a wrong key.
    func testSQLCipher4FileWithAppChosenSettingsOpensOrIsToldApart() throws {
        let cases: [(name: String, pragmas: String, settings: CipherSettings)] = [
            (
                "pages", "PRAGMA cipher_page_size = 8192\nPRAGMA kdf_iter = 12000\n",
                CipherSettings(pageSize: 8192, unsafeKDFIterations: 12_000)
            ),
            (
                "algorithms",
                "PRAGMA cipher_hmac_algorithm = HMAC_SHA256\nPRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA256\n",
                CipherSettings(hmacAlgorithm: .sha256, kdfAlgorithm: .pbkdf2SHA256)
            ),
            ("sha1", "PRAGMA cipher_hmac_algorithm = HMAC_SHA1\n", CipherSettings(hmacAlgorithm: .sha1)),
            // No page HMACs: on SQLCipher 3 the key is told by decrypting page 1 (a setting both lines have).
            ("nohmac", "PRAGMA cipher_use_hmac = OFF\n", CipherSettings(usesHMAC: false)),
        ]
        for (name, pragmas, settings) in cases {
            let path = directory.path("\(name).db")
            let made = try python(
                pragmas.split(separator: "\n").map { "db.execute(\"\($0)\")\n" }.joined()
                    + "db.execute(\"CREATE TABLE t (a TEXT)\")\ndb.execute(\"INSERT INTO t VALUES ('\(name)')\")\n"
                    + "db.commit()\n",
                path: path, key: "app passphrase")
            XCTAssertEqual(made.status, 0, made.stderr)
            for (key, right) in [("app passphrase", true), ("wrong passphrase", false)] {
                let db = FMDatabase(path: path)
                db.logsErrors = false
                XCTAssertTrue(db.open())
                defer { db.close() }
                let opened = Result { try db.setKey(using: PassphraseKeyProvider(key), settings: settings) }
                if CipherFormat.v4.isSupportedByLinkedSQLCipher {
                    if right {
                        XCTAssertNoThrow(try opened.get(), name)
                        XCTAssertEqual(db.string(forQuery: "SELECT a FROM t"), name)
                    } else {
                        XCTAssertThrowsError(try opened.get()) { XCTAssertEqual(nsError($0).code, Int(SQLITE_NOTADB)) }
                    }
                } else if right || !["pages", "nohmac"].contains(name) {
                    // The right key, or settings only SQLCipher 4 has: code 24, naming SQLCipher 4.
                    XCTAssertThrowsError(try opened.get(), name) { error in
                        XCTAssertEqual(nsError(error).code, Int(SQLITE_FORMAT), "\(name): \(error)")
                        XCTAssertTrue("\(error)".contains("SQLCipher 4"), "\(error)")
                    }
                } else {
                    XCTAssertThrowsError(try opened.get(), name) { error in
                        XCTAssertEqual(nsError(error).code, Int(SQLITE_NOTADB), "\(name): \(error)")
                    }
                }
            }
        }
        // The tool: exit 69 for the right key with flags describing the file, 65 for a wrong one.
        guard !CipherFormat.v4.isSupportedByLinkedSQLCipher else { return }
        for (key, status) in [("app passphrase", Int32(69)), ("wrong passphrase", Int32(65))] {
            let info = try runTool(
                [
                    "info", directory.path("pages.db"), "--key-env", "K", "--cipher-page-size", "8192", "--kdf-iter",
                    "12000",
                ],
                env: ["K": key])
            XCTAssertEqual(info.status, status, info.stderr)
        }
    }
    /// An iOS app in a shared app-group container writes a plaintext header (`cipher_plaintext_header_size =
    /// 32`) and keeps the salt itself. Such a file is encrypted, never "plaintext", in the library and in
    /// every command; with its header size and salt it opens on SQLCipher 4, and on SQLCipher 3 those
    /// settings are refused with code 24 (exit 69) naming SQLCipher 4.
    func testFileWithAPlaintextHeaderIsEncryptedAndOpensWithItsHeaderAndSalt() throws {
        let path = directory.path("shared.db")
        let salt = "00112233445566778899aabbccddeeff"
        let made = try python(
            """
            db.execute("PRAGMA cipher_plaintext_header_size = 32")
            db.execute("PRAGMA cipher_salt = \\"x'\(salt)'\\"")
            db.execute("CREATE TABLE t (a TEXT)")
            db.execute("INSERT INTO t VALUES ('from an app group')")
            db.commit()
            """, path: path, key: "group key")
        XCTAssertEqual(made.status, 0, made.stderr)
        let head = try XCTUnwrap(FileHandle(forReadingAtPath: path)).readData(ofLength: 16)
        XCTAssertEqual(String(decoding: head.prefix(15), as: UTF8.self), "SQLite format 3", "the writer kept a header")
        XCTAssertEqual(FMDatabase.inspectFile(atPath: path), .encryptedWithPlaintextHeader(size: 32))

        let saltBytes = Data((0..<16).map { UInt8($0 * 0x11) })
        let settings = CipherSettings(plaintextHeaderSize: 32, salt: saltBytes)
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        // Without its header size and salt the key cannot read it: a wrong key (26), the file unchanged.
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("group key"))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_NOTADB))
        }
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            try db.setKey(using: PassphraseKeyProvider("group key"), settings: settings)
            XCTAssertEqual(db.string(forQuery: "SELECT a FROM t"), "from an app group")
        } else {
            XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("group key"), settings: settings)) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_FORMAT))
                XCTAssertTrue("\($0)".contains("SQLCipher 4"), "\($0)")
                XCTAssertFalse("\($0)".contains(salt), "the salt is never said")
            }
        }

        // The tool: encrypted with a plaintext header in info (no key needed), never "plaintext" anywhere.
        let info = try runTool(["info", path, "--json"])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertTrue(info.stdout.contains("\"plaintext_header_size\" : 32"), info.stdout)
        XCTAssertTrue(info.stdout.contains("encrypted, with a plaintext header of 32 bytes"), info.stdout)
        let flags = ["--cipher-plaintext-header-size", "32", "--cipher-salt", "x'\(salt)'"]
        let opened = CipherFormat.v4.isSupportedByLinkedSQLCipher ? Int32(0) : Int32(69)
        for command in [
            ["decrypt", path, directory.path("out.db")], ["export", path, directory.path("copy.db")],
            ["rekey", path], ["info", path], ["sql", path, "SELECT a FROM t", "--read-only"], ["check", path],
        ] {
            let newKey = ["export", "rekey"].contains(command[0]) ? ["--new-key-env", "N"] : []
            let bare = try runTool(command + ["--key-env", "K"] + newKey, env: ["K": "group key", "N": "other key"])
            XCTAssertFalse(bare.stderr.contains("plaintext SQLite"), "\(command[0]): \(bare.stderr)")
            XCTAssertFalse(bare.stderr.contains("not encrypted"), "\(command[0]): \(bare.stderr)")
            XCTAssertFalse(bare.stderr.contains("is a plaintext database"), "\(command[0]): \(bare.stderr)")
            XCTAssertEqual(bare.status, 65, "\(command[0]): \(bare.stderr)")
            XCTAssertTrue(bare.stderr.contains("encrypted, with a plaintext header of 32 bytes"), bare.stderr)
            XCTAssertTrue(bare.stderr.contains("--cipher-plaintext-header-size 32"), bare.stderr)
            guard ["info", "sql", "check"].contains(command[0]) else { continue }
            let given = try runTool(command + ["--key-env", "K"] + flags, env: ["K": "group key"])
            XCTAssertEqual(given.status, opened, "\(command[0]): \(given.stderr)")
            XCTAssertFalse(given.stderr.contains(salt), "the salt is never said: \(given.stderr)")
        }
        XCTAssertEqual(FMDatabase.inspectFile(atPath: path), .encryptedWithPlaintextHeader(size: 32), "unchanged")
    }

    /// Files Python wrote with the settings apps choose, rekeyed by the tool (given the flags that describe
    /// each file) to a raw key: Python opens each again with the new key and its own settings, and reads the
    /// row it wrote. Rekeying such a file needs SQLCipher 4 (a SQLCipher 3 line says so, code 24).
    func testFilesPythonWroteRoundTripThroughTheToolRekey() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            throw XCTSkip("the linked SQLCipher is 3.x: these files need SQLCipher 4 (tested as exit 69 above)")
        }
        let salt = "00112233445566778899aabbccddeeff"
        let newKey = String(repeating: "5a", count: 32)
        let cases: [(name: String, pragmas: [String], flags: [String])] = [
            ("pages", ["PRAGMA cipher_page_size = 8192"], ["--cipher-page-size", "8192"]),
            (
                "algorithms",
                ["PRAGMA cipher_hmac_algorithm = HMAC_SHA256", "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA256"],
                ["--cipher-hmac-algorithm", "HMAC_SHA256", "--cipher-kdf-algorithm", "PBKDF2_HMAC_SHA256"]
            ),
            ("sha1", ["PRAGMA cipher_hmac_algorithm = HMAC_SHA1"], ["--cipher-hmac-algorithm", "HMAC_SHA1"]),
            ("nohmac", ["PRAGMA cipher_use_hmac = OFF"], ["--cipher-use-hmac", "off"]),
            (
                "header", ["PRAGMA cipher_plaintext_header_size = 32", "PRAGMA cipher_salt = \\\"x'\(salt)'\\\""],
                ["--cipher-plaintext-header-size", "32", "--cipher-salt", salt]
            ),
        ]
        for (name, pragmas, flags) in cases {
            let path = directory.path("round-\(name).db")
            let settings = pragmas.map { "db.execute(\"\($0)\")\n" }.joined()
            let made = try python(
                settings + "db.execute(\"CREATE TABLE t (a TEXT)\")\ndb.execute(\"INSERT INTO t VALUES ('\(name)')\")\n"
                    + "db.commit()\n", path: path, key: "app passphrase")
            XCTAssertEqual(made.status, 0, "\(name): \(made.stderr)")
            let rekeyed = try runTool(
                ["rekey", path, "--key-env", "K", "--new-kdf", "raw", "--new-key-env", "N", "--quiet"] + flags,
                env: ["K": "app passphrase", "N": newKey])
            XCTAssertEqual(rekeyed.status, 0, "\(name): \(rekeyed.stderr)")
            let reopened = try python(
                settings + "print(db.execute(\"SELECT a FROM t\").fetchone()[0])\n", path: path, key: "x'\(newKey)'")
            XCTAssertEqual(reopened.status, 0, "\(name): \(reopened.stderr)")
            XCTAssertEqual(reopened.stdout, "\(name)\n", "\(name): Python reads its row under the new key")
            let old = try python(
                "print(db.execute(\"SELECT a FROM t\").fetchone()[0])\n", path: path, key: "app passphrase")
            XCTAssertNotEqual(old.status, 0, "\(name): the old key no longer opens it")
        }
    }
}
