import FMDB
import Foundation
import TestSupport
import XCTest

/// Through the `fmdb-cipher` binary: SQL text cannot change the key, and new files
/// get no KDF below the floor unless spelled `--unsafe-…`.
final class SecurityGuardToolTests: ToolTestCase {
    @discardableResult
    func runKeyed(_ arguments: [String], key: String = "k1", newKey: String = "k2") throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try run(arguments, env: ["K": key, "NK": newKey])
    }

    func rows(_ path: String, key: String, iterations: Int? = nil) throws -> Int32? {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open() else { return nil }
        defer { db.close() }
        guard
            (try? db.setKey(using: PassphraseKeyProvider(key), settings: CipherSettings(kdfIterations: iterations)))
                != nil
        else {
            return nil
        }
        return db.executeQuery("SELECT count(*) FROM t").flatMap { $0.next() ? $0.int(forColumnIndex: 0) : nil }
    }

    func makePlaintext() throws -> String {
        let path = directory.path("plain.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeStatements("CREATE TABLE t (a); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)"))
        db.close()
        return path
    }

    func testSQLCannotChangeTheKey() throws {
        let db = directory.path("enc.db")
        XCTAssertEqual(
            try runKeyed(["sql", db, "CREATE TABLE t (a); INSERT INTO t VALUES (1)", "--key-env", "K", "--create"])
                .status, 0)
        for sql in [
            "INSERT INTO t VALUES (2); PRAGMA key='other'; INSERT INTO t VALUES (3)",
            "PRAGMA rekey='other'; INSERT INTO t VALUES (3)",
            "PRAGMA cipher_use_hmac = OFF; INSERT INTO t VALUES (3)",
            "PRAGMA temp_store = FILE",
            "ATTACH DATABASE '\(directory.path("leak.db"))' AS p KEY ''; SELECT sqlcipher_export('p')",
        ] {
            let result = try runKeyed(["sql", db, sql, "--key-env", "K"])
            XCTAssertEqual(result.status, 1, "an SQL error: \(sql)")
            XCTAssertTrue(result.stderr.contains("refused"), "\(sql): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("k1"), "the key is never printed")
        }
        // Only the first statement of the first script ran; the real key still opens the file, intact.
        XCTAssertEqual(try rows(db, key: "k1"), 2)
        XCTAssertNil(try rows(db, key: "other"))
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: directory.path("leak.db")), "ATTACH never ran: no plaintext copy")
    }

    func testEncryptRefusesAWeakKDFUnlessSpelledUnsafe() throws {
        let plain = try makePlaintext()
        let weak = directory.path("weak.db")
        let refused = try runKeyed(["encrypt", plain, weak, "--key-env", "K", "--new-kdf-iter", "1", "--quiet"])
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("use --unsafe-new-kdf-iter 1"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: weak))
        XCTAssertEqual(
            try runKeyed(["encrypt", plain, weak, "--key-env", "K", "--new-kdf-iter", "64000", "--quiet"]).status, 0)
        let unsafe = directory.path("unsafe.db")
        let written = try runKeyed(
            ["encrypt", plain, unsafe, "--key-env", "K", "--unsafe-new-kdf-iter", "1000", "--quiet"])
        XCTAssertEqual(written.status, 0, written.stderr)
        XCTAssertEqual(try rows(unsafe, key: "k1", iterations: 1_000), 2)
        XCTAssertNil(try rows(unsafe, key: "k1"), "it really uses 1000 iterations")
        // A passphrase rekey would keep the weak count: refused, and the file still opens with its old key.
        let rekey = try runKeyed(["rekey", unsafe, "--key-env", "K", "--kdf-iter", "1000", "--new-key-env", "NK"])
        XCTAssertNotEqual(rekey.status, 0, rekey.stderr)
        XCTAssertTrue(rekey.stderr.contains("export"), rekey.stderr)
        XCTAssertEqual(try rows(unsafe, key: "k1", iterations: 1_000), 2)
        // Opening an old file with its own low count still works.
        let opened = try runKeyed(["sql", unsafe, "SELECT count(*) FROM t", "--key-env", "K", "--kdf-iter", "1000"])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertTrue(opened.stdout.contains("2"))
    }

    func testExportRefusesAWeakKDFUnlessSpelledUnsafe() throws {
        let plain = try makePlaintext()
        let source = directory.path("src.db")
        XCTAssertEqual(try runKeyed(["encrypt", plain, source, "--key-env", "K", "--quiet"]).status, 0)
        let weak = directory.path("weak.db")
        let refused = try runKeyed([
            "export", source, weak, "--key-env", "K", "--new-key-env", "NK", "--new-kdf-iter", "1", "--quiet",
        ])
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--unsafe-new-kdf-iter"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: weak))
        let both = try runKeyed([
            "export", source, weak, "--key-env", "K", "--new-key-env", "NK", "--new-kdf-iter", "64000",
            "--unsafe-new-kdf-iter", "1000", "--quiet",
        ])
        XCTAssertEqual(both.status, 64, both.stderr)
        let written = try runKeyed([
            "export", source, weak, "--key-env", "K", "--new-key-env", "NK", "--unsafe-new-kdf-iter", "1000", "--quiet",
        ])
        XCTAssertEqual(written.status, 0, written.stderr)
        XCTAssertEqual(try rows(weak, key: "k2", iterations: 1_000), 2)
        // Re-exporting the weak file (reading it with its own count) to a strong one works.
        let strong = directory.path("strong.db")
        let upgraded = try runKeyed([
            "export", weak, strong, "--key-env", "NK", "--kdf-iter", "1000", "--new-key-env", "K", "--quiet",
        ])
        XCTAssertEqual(upgraded.status, 0, upgraded.stderr)
        XCTAssertEqual(try rows(strong, key: "k1"), 2)
    }
}
