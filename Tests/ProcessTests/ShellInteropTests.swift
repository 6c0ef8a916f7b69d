import FMDB
import Foundation
import TestSupport
import XCTest

/// Files made here open in the `sqlcipher` shell (Debian package `sqlcipher`) and the other way round.
/// The shell gets its key on standard input (PRAGMA key), never on its command line.
final class ShellInteropTests: FMDBCipherTestCase {
    var shell: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        shell = try lineShell()
    }

    func runShell(_ path: String, _ script: String) throws -> (status: Int32, stdout: String, stderr: String) {
        try runSQLCipherShell(shell, path, script)
    }

    func testDatabaseMadeHereOpensInTheShell() throws {
        let path = directory.path("here.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.setKey("interop passphrase"))
        XCTAssertTrue(db.executeUpdate("create table t (a integer, b text)"))
        XCTAssertTrue(db.executeUpdate("insert into t values (?, ?)", 1, "from FMDB"))
        db.close()

        let result = try runShell(path, "PRAGMA key = 'interop passphrase';\nSELECT a, b FROM t;\n")
        XCTAssertEqual(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "1|from FMDB", result.stderr)
        let wrong = try runShell(path, "PRAGMA key = 'wrong';\nSELECT a, b FROM t;\n")
        XCTAssertTrue(wrong.stderr.contains("not a database"), wrong.stderr)
    }

    func testDatabaseMadeByTheShellOpensHere() throws {
        let path = directory.path("shell.db")
        let result = try runShell(
            path,
            "PRAGMA key = 'shell passphrase';\nCREATE TABLE t (a, b);\nINSERT INTO t VALUES (2, 'from the shell');\n")
        XCTAssertEqual(result.status, 0, result.stderr)
        let head = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16)
        XCTAssertNotEqual(head, Data("SQLite format 3\u{0}".utf8))

        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertNoThrow(try db.setKey(using: PassphraseKeyProvider("shell passphrase")))
        XCTAssertEqual(db.string(forQuery: "select b from t where a = 2"), "from the shell")
        XCTAssertTrue(db.rekey("rekeyed here"))
        db.close()

        let after = try runShell(path, "PRAGMA key = 'rekeyed here';\nSELECT b FROM t;\n")
        XCTAssertEqual(after.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "from the shell", after.stderr)
    }

    func testRawKeyInterop() throws {
        let path = directory.path("raw.db")
        let keyBytes = Data((0..<32).map { UInt8($0 * 7 % 256) })
        let hex = keyBytes.map { String(format: "%02x", $0) }.joined()
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertNoThrow(try db.setKey(using: RawKeyProvider(key: keyBytes)))
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertTrue(db.executeUpdate("insert into t values ('raw')"))
        db.close()
        let result = try runShell(path, "PRAGMA key = \"x'\(hex)'\";\nSELECT a FROM t;\n")
        XCTAssertEqual(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "raw", result.stderr)
    }
}
