import FMDB
import Foundation
import TestSupport
import XCTest

/// SQLCipher 4 files without page HMACs (`cipher_use_hmac = OFF`), written by the SQLCipher 4 shell
/// (FMDB_SQLCIPHER4_SHELL): given the flags that describe them, the right key opens them on SQLCipher 4 and
/// is exit 69 on SQLCipher 3 (which cannot read the format), a wrong key exit 65, on both lines.
final class SQLCipher4WithoutHMACToolTests: ToolTestCase {
    func shell4() throws -> String {
        guard let shell = ProcessInfo.processInfo.environment["FMDB_SQLCIPHER4_SHELL"],
            FileManager.default.isExecutableFile(atPath: shell)
        else { throw XCTSkip("FMDB_SQLCIPHER4_SHELL (a sqlcipher 4 shell) is not set") }
        return shell
    }

    func testTheRightKeyToASQLCipher4FileWithoutHMACsIsTold() throws {
        let shell = try shell4()
        let raw = String(repeating: "c4", count: 32)
        let cases: [(name: String, keying: String, key: String, flags: [String])] = [
            ("passphrase", "PRAGMA key = 'app key';", "app key", []),
            ("raw", "PRAGMA key = \"x'\(raw)'\";", raw, ["--kdf", "raw"]),
            (
                "sized", "PRAGMA key = 'app key';\nPRAGMA cipher_page_size = 8192;\nPRAGMA kdf_iter = 100000;",
                "app key", ["--cipher-page-size", "8192", "--kdf-iter", "100000"]
            ),
        ]
        for item in cases {
            let file = path("v4-nohmac-\(item.name).db")
            let made = try runSQLCipherShell(
                shell, file,
                item.keying + "\nPRAGMA cipher_use_hmac = OFF;\nCREATE TABLE t (a);\nINSERT INTO t VALUES (4);\n")
            XCTAssertEqual(made.status, 0, made.stderr)
            let query =
                ["sql", file, "SELECT a FROM t", "--csv", "--key-env", "K", "--cipher-use-hmac", "off"]
                + item.flags
            let right = try run(query, env: ["K": item.key])
            if CipherFormat.v4.isSupportedByLinkedSQLCipher {
                XCTAssertEqual(right.status, 0, "\(item.name): \(right.stderr)")
                XCTAssertEqual(right.stdout.split(separator: "\n").last, "4", right.stdout)
            } else {
                XCTAssertEqual(right.status, 69, "\(item.name): \(right.stderr)")
                XCTAssertTrue(right.stderr.contains("the key is right"), right.stderr)
            }
            let wrongKey = item.name == "raw" ? String(repeating: "d5", count: 32) : "not the key"
            let wrong = try run(query, env: ["K": wrongKey])
            XCTAssertEqual(wrong.status, 65, "\(item.name): \(wrong.stderr)")
        }
    }

    /// A file with a plaintext header (an iOS shared container's): on SQLCipher 3, which cannot read it, the
    /// right key with the header and salt given is exit 69 saying the key is right; a wrong key is exit 65.
    func testTheRightKeyToAPlaintextHeaderFileIsTold() throws {
        let shell = try shell4()
        let salt = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
        let raw = String(repeating: "e6", count: 32)
        for (name, keying, key, kdf) in [
            ("raw", "PRAGMA key = \"x'\(raw)'\";", raw, ["--kdf", "raw"]),
            ("passphrase", "PRAGMA key = 'app key';", "app key", []),
        ] {
            let file = path("header-\(name).db")
            let made = try runSQLCipherShell(
                shell, file,
                keying + "\nPRAGMA cipher_plaintext_header_size = 32;\nPRAGMA cipher_salt = \"x'\(salt)'\";\n"
                    + "CREATE TABLE t (a);\nINSERT INTO t VALUES (32);\n")
            XCTAssertEqual(made.status, 0, made.stderr)
            let query =
                ["sql", file, "SELECT a FROM t", "--csv", "--key-env", "K", "--cipher-plaintext-header-size", "32"]
                + ["--cipher-salt", salt] + kdf
            let right = try run(query, env: ["K": key])
            if CipherFormat.v4.isSupportedByLinkedSQLCipher {
                XCTAssertEqual(right.status, 0, "\(name): \(right.stderr)")
                XCTAssertEqual(right.stdout.split(separator: "\n").last, "32", right.stdout)
            } else {
                XCTAssertEqual(right.status, 69, "\(name): \(right.stderr)")
                XCTAssertTrue(right.stderr.contains("the key is right"), right.stderr)
            }
            let wrongKey = name == "raw" ? String(repeating: "f7", count: 32) : "not the key"
            let wrong = try run(query, env: ["K": wrongKey])
            XCTAssertEqual(wrong.status, 65, "\(name): \(wrong.stderr)")
        }
    }
}
