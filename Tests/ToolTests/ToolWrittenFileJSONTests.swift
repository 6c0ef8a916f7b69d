import FMDB
import Foundation
import XCTest

/// `--json` on the commands that write a file (`encrypt`, `export`, `migrate`, `rekey`): one JSON object on
/// standard output that says the file and the flags that open it (`open_with`), which are the flags that do.
/// `sql --create` says a new file's flags on standard error.
final class ToolWrittenFileJSONTests: ToolTestCase {
    /// The one JSON object on `stdout`.
    private func object(_ stdout: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any], stdout)
    }

    /// The note's flags on `stderr` (nil: no note).
    private func noteFlags(_ stderr: String) -> [String]? {
        guard let line = stderr.split(separator: "\n").first(where: { $0.contains("needs these settings") }),
            let colon = line.range(of: "them): ")
        else { return nil }
        return line[colon.upperBound...].split(separator: " ").map(String.init)
    }

    func testEncryptJSONCarriesTheFlagsThatOpenTheFile() throws {
        let plain = try makePlaintext()
        let dest = path("paged.db")
        let made = try run(
            [
                "encrypt", plain, dest, "--kdf", "raw", "--key-env", "K", "--new-cipher-page-size", "8192", "--quiet",
                "--json",
            ], env: ["K": Self.rawKey])
        XCTAssertEqual(made.status, 0, made.stderr)
        let json = try object(made.stdout)
        XCTAssertEqual(json["path"] as? String, dest)
        let flags = try XCTUnwrap(json["open_with"] as? [String], "\(json)")
        XCTAssertEqual(flags, ["--kdf", "raw", "--cipher-page-size", "8192"])
        XCTAssertEqual(json["cipher_page_size"] as? Int, 8192)
        XCTAssertEqual(json["kdf"] as? String, "raw")
        XCTAssertTrue(json["key_slots"] is NSNull, "\(json)")
        XCTAssertFalse(made.stdout.contains(Self.rawKey))
        let opened = try run(["check", dest, "--key-env", "K"] + flags, env: ["K": Self.rawKey])
        XCTAssertEqual(opened.status, 0, opened.stderr)

        // Default settings: an empty open_with, and the object all the same.
        let plainDefault = try run(
            ["encrypt", plain, path("default.db"), "--key-env", "K", "--quiet", "--json"], env: ["K": "a passphrase"])
        XCTAssertEqual(plainDefault.status, 0, plainDefault.stderr)
        let defaults = try object(plainDefault.stdout)
        XCTAssertEqual(defaults["open_with"] as? [String], [])
        XCTAssertEqual(defaults["kdf"] as? String, "passphrase")
        XCTAssertNotNil(defaults["kdf_iter"] as? Int, "\(defaults)")
    }

    func testEncryptRecoveryJSONHoldsTheRecoveryKeyThatOpensTheFile() throws {
        let plain = try makePlaintext(rows: 5)
        let dest = path("slotted.db")
        let made = try run(
            ["encrypt", plain, dest, "--kdf", "slot", "--recovery", "--key-env", "K", "--quiet", "--json"],
            env: ["K": "an administrator's passphrase"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let json = try object(made.stdout)
        XCTAssertEqual(json["key_slots"] as? String, KeySlots.slotFilePath(forDatabaseAt: dest))
        XCTAssertEqual(json["open_with"] as? [String], [])
        XCTAssertEqual(json["recovery_slot"] as? Int, 2)
        let recovery = try XCTUnwrap(json["recovery_key"] as? String, "\(json)")
        XCTAssertTrue(made.stderr.contains("recovery_key"), made.stderr)
        XCTAssertFalse(made.stderr.contains(recovery), "the key is on standard output only")
        let opened = try run(
            ["sql", dest, "select count(*) from t", "--csv", "--key-env", "R"], env: ["R": recovery])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertEqual(opened.stdout, "count(*)\n5\n")
    }

    func testExportAndRekeyJSONCarryTheFlags() throws {
        let source = try makeEncrypted()
        let copy = path("copy.db")
        let exported = try run(
            [
                "export", source, copy, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--new-kdf", "pbkdf2",
                "--new-cipher-page-size", "8192", "--quiet", "--json",
            ], env: ["K": Self.rawKey, "N": "a new passphrase"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let exportJSON = try object(exported.stdout)
        XCTAssertEqual(exportJSON["path"] as? String, copy)
        XCTAssertEqual(exportJSON["open_with"] as? [String], ["--kdf", "pbkdf2", "--cipher-page-size", "8192"])
        XCTAssertEqual(noteFlags(exported.stderr), ["--kdf", "pbkdf2", "--cipher-page-size", "8192"])

        let rekeyed = try run(
            [
                "rekey", copy, "--kdf", "pbkdf2", "--cipher-page-size", "8192", "--key-env", "N", "--new-kdf", "scrypt",
                "--new-key-env", "S", "--quiet", "--json",
            ], env: ["N": "a new passphrase", "S": "a scrypt passphrase"])
        XCTAssertEqual(rekeyed.status, 0, rekeyed.stderr)
        let flags = try XCTUnwrap(try object(rekeyed.stdout)["open_with"] as? [String], rekeyed.stdout)
        XCTAssertEqual(flags, ["--kdf", "scrypt", "--cipher-page-size", "8192"])
        let check = try run(["check", copy, "--key-env", "S"] + flags, env: ["S": "a scrypt passphrase"])
        XCTAssertEqual(check.status, 0, check.stderr)
    }

    func testMigrateSaysTheFlagsOfTheUpgradedFile() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { return }
        // A format-3 file under a key fmdb-cipher derives (pbkdf2): the upgraded file needs --kdf pbkdf2.
        let source = try makeEncrypted()
        let old = path("old.db")
        let exported = try run(
            [
                "export", source, old, "--kdf", "raw", "--key-env", "K", "--new-kdf", "pbkdf2", "--new-key-env", "P",
                "--format", "3", "--quiet",
            ], env: ["K": Self.rawKey, "P": "a pbkdf2 passphrase"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let upgraded = path("new.db")
        let migrated = try run(
            ["migrate", old, upgraded, "--kdf", "pbkdf2", "--key-env", "P", "--quiet", "--json"],
            env: ["P": "a pbkdf2 passphrase"])
        XCTAssertEqual(migrated.status, 0, migrated.stderr)
        XCTAssertEqual(noteFlags(migrated.stderr), ["--kdf", "pbkdf2"], migrated.stderr)
        let json = try object(migrated.stdout)
        XCTAssertEqual(json["path"] as? String, upgraded)
        XCTAssertEqual(json["format"] as? Int, 4)
        let flags = try XCTUnwrap(json["open_with"] as? [String], "\(json)")
        XCTAssertEqual(flags, ["--kdf", "pbkdf2"])
        let check = try run(["check", upgraded, "--key-env", "P"] + flags, env: ["P": "a pbkdf2 passphrase"])
        XCTAssertEqual(check.status, 0, check.stderr)
    }

    func testSQLCreateSaysTheFlagsOfANewFileWithOtherSettings() throws {
        let db = path("new.db")
        let created = try run(
            [
                "sql", db, "create table t (a); insert into t values (1)", "--create", "--kdf", "raw",
                "--cipher-page-size", "8192", "--key-env", "K",
            ], env: ["K": Self.rawKey])
        XCTAssertEqual(created.status, 0, created.stderr)
        let flags = try XCTUnwrap(noteFlags(created.stderr), created.stderr)
        XCTAssertEqual(flags, ["--kdf", "raw", "--cipher-page-size", "8192"])
        let read = try run(["sql", db, "select a from t", "--csv", "--key-env", "K"] + flags, env: ["K": Self.rawKey])
        XCTAssertEqual(read.stdout, "a\n1\n", read.stderr)
        // Default settings: nothing said; and an existing file is not new.
        let plain = try run(
            ["sql", path("plain-settings.db"), "create table t (a)", "--create", "--key-env", "K"],
            env: ["K": "a passphrase"])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertNil(noteFlags(plain.stderr), plain.stderr)
        let again = try run(
            ["sql", db, "select 1", "--kdf", "raw", "--cipher-page-size", "8192", "--key-env", "K"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertNil(noteFlags(again.stderr), again.stderr)
    }
}
