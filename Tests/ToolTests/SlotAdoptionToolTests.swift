import FMDB
import Foundation
import TestSupport
import XCTest

/// An existing single-key database goes under key slots without a plaintext copy: `export SRC DEST
/// --new-kdf slot|slot-raw` writes DEST with a random data key and a slot file whose first slot is the new
/// key, verified and atomic as every copy; the old key no longer opens DEST (said on standard error) unless
/// `--keep-old-key` keeps it as a slot; SRC is untouched. The sources are written by the line's `sqlcipher`
/// shell, as the apps that wrote them would.
final class SlotAdoptionToolTests: ToolTestCase {
    /// A database the line's `sqlcipher` shell writes under `keyPragma` (`'passphrase'` or `"x'…'"`), with a
    /// table `t` of `rows` rows.
    func shellDatabase(_ name: String, keyPragma: String, rows: Int = 40) throws -> String {
        let shell = try lineShell()
        let file = path(name)
        let made = try runSQLCipherShell(
            shell, file,
            "PRAGMA key = \(keyPragma);\nCREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\n"
                + "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows)) "
                + "INSERT INTO t (v) SELECT 'SECRET-ROW-' || i FROM n;\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        return file
    }

    func count(_ file: String, _ arguments: [String], key: String) throws -> (status: Int32, rows: String?) {
        let result = try run(
            ["sql", file, "--csv", "select count(*) from t"] + arguments + ["--key-env", "K"], env: ["K": key])
        return (result.status, result.status == 0 ? result.stdout.split(separator: "\n").last.map(String.init) : nil)
    }

    /// No file in the test's folder holds a row in clear (the SQLite header, or a row's text).
    func assertNothingReadableOnDisk(file: StaticString = #filePath, line: UInt = #line) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path) {
            let data = try Data(contentsOf: URL(fileURLWithPath: path(name)))
            XCTAssertFalse(
                data.starts(with: Data("SQLite format 3\0".utf8)), "\(name) is plaintext", file: file, line: line)
            XCTAssertNil(
                data.range(of: Data("SECRET-ROW-".utf8)), "\(name) holds a row in clear", file: file, line: line)
        }
    }

    func testAPassphraseDatabaseGoesUnderSlotsAndTheOldKeyStopsOpeningIt() throws {
        let source = try shellDatabase("app.db", keyPragma: "'old passphrase'")
        let before = try Data(contentsOf: URL(fileURLWithPath: source))
        let destination = path("slotted.db")
        let result = try run(
            [
                "export", source, destination, "--key-env", "OLD", "--new-key-env", "OPS", "--new-kdf", "slot",
                "--slot-kdf", "pbkdf2", "--quiet",
            ],
            env: ["OLD": "old passphrase", "OPS": "ops passphrase"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("the old key does not open \(destination)"), result.stderr)
        XCTAssertTrue(result.stderr.contains("--keep-old-key"), "it says how to keep the old key: \(result.stderr)")
        XCTAssertFalse(result.stderr.contains("old passphrase") || result.stderr.contains("ops passphrase"))

        XCTAssertEqual(try count(destination, ["--kdf", "slot"], key: "ops passphrase").rows, "40")
        XCTAssertEqual(try count(destination, [], key: "ops passphrase").rows, "40", "found through its slots")
        XCTAssertEqual(try count(destination, ["--kdf", "slot"], key: "old passphrase").status, 65)
        XCTAssertEqual(try count(destination, ["--kdf", "passphrase"], key: "old passphrase").status, 65)
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: destination).count, 1)
        XCTAssertEqual(mode(destination), 0o600)
        XCTAssertEqual(mode(KeySlots.slotFilePath(forDatabaseAt: destination)), 0o600)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: source)), before, "SRC is not changed")
        XCTAssertEqual(try count(source, ["--kdf", "passphrase"], key: "old passphrase").rows, "40")
        try assertNothingReadableOnDisk()
    }

    func testARawKeyDatabaseKeepsItsOldKeyAsASlotAndGetsARecoveryKey() throws {
        let oldKey = Self.rawKey
        let source = try shellDatabase("raw.db", keyPragma: "\"x'\(oldKey)'\"")
        let destination = path("slotted.db")
        let result = try run(
            [
                "export", source, destination, "--kdf", "raw", "--key-env", "OLD", "--new-key-env", "NEW",
                "--new-kdf", "slot-raw", "--keep-old-key", "--recovery", "--quiet",
            ],
            env: ["OLD": oldKey, "NEW": Self.otherRawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("the old key opens \(destination) through slot"), result.stderr)
        XCTAssertTrue(result.stderr.contains("no longer open"), "direct keying no longer opens it: \(result.stderr)")
        let recovery = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(recovery.split(separator: "-").count, 9, "the recovery key, shown once: \(result.stdout)")

        XCTAssertEqual(try count(destination, ["--kdf", "slot-raw"], key: Self.otherRawKey).rows, "40")
        XCTAssertEqual(try count(destination, ["--kdf", "slot-raw"], key: oldKey).rows, "40", "the kept old key")
        XCTAssertEqual(try count(destination, ["--kdf", "slot-recovery"], key: recovery).rows, "40")
        XCTAssertEqual(try count(destination, ["--kdf", "raw"], key: oldKey).status, 65, "not directly")
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: destination).count, 3, "new key, old key, recovery key")
        XCTAssertEqual(rowCount(source, rawKey: oldKey), 40, "SRC is not changed")
        try assertNothingReadableOnDisk()
    }

    func testSlotOptionsWithoutASlotKindAndRekeyIntoSlotsAreUsageErrors() throws {
        let source = try makeEncrypted()
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let stray = try run(
            ["export", source, path("d.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--recovery"],
            env: env)
        XCTAssertEqual(stray.status, 64, stray.stderr)
        XCTAssertTrue(stray.stderr.contains("--new-kdf slot"), stray.stderr)
        let rekey = try run(
            ["rekey", source, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--new-kdf", "slot-raw"], env: env
        )
        XCTAssertEqual(rekey.status, 64, rekey.stderr)
        let rekeyHelp = try run(["rekey", "--help"]).stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(rekeyHelp.contains("export SRC DEST --new-kdf slot"), "rekey's help names the copy: \(rekeyHelp)")
        XCTAssertEqual(rowCount(source, rawKey: Self.rawKey), 50, "nothing changed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("d.db")))
    }
}
