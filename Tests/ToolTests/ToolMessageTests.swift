import FMDB
import Foundation
import XCTest

/// Messages an operator can act on: a mistyped command gets a suggestion, an unset variable is named, a
/// malformed raw key is a usage error, and every error starts "fmdb-cipher: ".
final class ToolMessageTests: ToolTestCase {
    func testAMistypedSubcommandGetsADidYouMean() throws {
        let result = try run(["rekye", "app.db"])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(
            result.stderr.hasPrefix("fmdb-cipher: unknown command 'rekye'; did you mean 'rekey'?"), result.stderr)
        XCTAssertFalse(result.stderr.contains("unexpected argument"), result.stderr)
        XCTAssertFalse(result.stderr.contains("app.db"), "the other arguments are not repeated: \(result.stderr)")

        let nested = try run(["keys", "lsit", "app.db"])
        XCTAssertEqual(nested.status, 64, nested.stderr)
        XCTAssertTrue(
            nested.stderr.hasPrefix("fmdb-cipher: keys: unknown command 'lsit'; did you mean 'list'?"), nested.stderr)
        // A short or mixed word may be a secret typed in the wrong place: never repeated.
        for word in ["sq1", "inf0", "ad"] {
            let near = try run(["keys", word, "app.db"])
            XCTAssertEqual(near.status, 64, near.stderr)
            XCTAssertTrue(near.stderr.contains("(not shown, in case it is a key)"), near.stderr)
            XCTAssertFalse(near.stderr.contains("'\(word)'"), near.stderr)
        }
    }

    func testAWordFarFromEveryCommandIsNotRepeated() throws {
        let result = try run(["Tr0ub4dor&3-secret", "app.db"])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(result.stderr.contains("unknown command (not shown"), result.stderr)
        XCTAssertTrue(result.stderr.contains("rekey, encrypt"), "the commands are listed: \(result.stderr)")
        XCTAssertFalse(result.stderr.contains("Tr0ub4dor"), result.stderr)
    }

    /// Runs the tool with `names` removed from its environment (`env -u`), whatever the test runner's has.
    private func runUnsetting(_ names: [String], _ arguments: [String], env: [String: String] = [:]) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try runTool(arguments, env: env, wrapper: ["env"] + names.flatMap { ["-u", $0] })
    }

    func testAnUnsetKeyVariableIsNamedButAKeyShapedNameIsNot() throws {
        let enc = try makeEncrypted()
        // A variable's shape, long with `_`, or short in one word: named.
        for name in ["FMDB_TEST_UNSET_KEY", "K", "DBKEY", "DB_PASS"] {
            let named = try runUnsetting([name], ["info", enc, "--kdf", "raw", "--key-env", name])
            XCTAssertEqual(named.status, 64, named.stderr)
            XCTAssertTrue(
                named.stderr.hasPrefix("fmdb-cipher: the environment variable \(name) (the key for "),
                "\(name): \(named.stderr)")
        }
        let hidden = try run(["info", enc, "--kdf", "raw", "--key-env", "correct horse"])
        XCTAssertEqual(hidden.status, 64, hidden.stderr)
        XCTAssertFalse(hidden.stderr.contains("horse"), "a name that may be a key is not repeated: \(hidden.stderr)")
        // Nor one shaped like a key: base32 (no underscore), base64 or mixed case, hexadecimal, or too long.
        for keyShaped in [
            "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP", "q7Xz0bLk3VwP9sR2tYu", "S3cr3tTyped", "DEADBEEF",
            "cafe0123babe",
            // Passphrases typed in place of a name: any lower case, or a longer word without `_`.
            "hunter2", "password1", "correct_horse_battery", "db_key", "PASSWORD1", "HUNTER2",
            String(repeating: "AB_", count: 11),
        ] {
            let shaped = try runUnsetting([keyShaped], ["info", enc, "--kdf", "raw", "--key-env", keyShaped])
            XCTAssertEqual(shaped.status, 64, shaped.stderr)
            XCTAssertFalse(shaped.stderr.contains(keyShaped), shaped.stderr)
            XCTAssertTrue(shaped.stderr.contains("is not set (its name is not shown"), shaped.stderr)
        }
        let rawShaped = String(repeating: "AB", count: 32)
        let raw = try run(["info", enc, "--kdf", "raw", "--key-env", rawShaped])
        XCTAssertFalse(raw.stderr.contains(rawShaped), raw.stderr)
        let newKey = try runUnsetting(
            ["FMDB_TEST_UNSET_NEW"],
            ["rekey", enc, "--kdf", "raw", "--key-env", "K", "--new-key-env", "FMDB_TEST_UNSET_NEW"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(newKey.status, 64, newKey.stderr)
        XCTAssertTrue(newKey.stderr.contains("FMDB_TEST_UNSET_NEW (the new key for "), newKey.stderr)
    }

    func testEveryMessageListingTheKeySourcesNamesKeyCredential() throws {
        let enc = try makeEncrypted()
        let onCommandLine = try run(["info", enc, "--key", "hunter2-hunter2"])
        XCTAssertEqual(onCommandLine.status, 64, onCommandLine.stderr)
        XCTAssertTrue(
            onCommandLine.stderr.contains("--key-stdin or --key-credential NAME instead"), onCommandLine.stderr)
        XCTAssertFalse(onCommandLine.stderr.contains("hunter2"), onCommandLine.stderr)
        // Standard input is not a terminal: no prompt, the sources are listed.
        let noKey = try run(["sql", enc, "select 1", "--kdf", "raw"])
        XCTAssertEqual(noKey.status, 64, noKey.stderr)
        XCTAssertTrue(
            noKey.stderr.contains("--key-stdin or --key-credential NAME (or run on a terminal"), noKey.stderr)
        // The new key has no credential option: its message names the --new-key-* options.
        let noNewKey = try run(["rekey", enc, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
        XCTAssertEqual(noNewKey.status, 64, noNewKey.stderr)
        XCTAssertTrue(
            noNewKey.stderr.contains("use --new-key-env VAR, --new-key-file PATH or --new-key-stdin"), noNewKey.stderr)
    }

    func testAMalformedRawKeyIsAUsageErrorInTheToolsStyle() throws {
        let enc = try makeEncrypted()
        for (arguments, secret) in [
            (["sql", enc, "select 1", "--kdf", "raw", "--key-env", "K"], "tooshort-zq"),
            (["keys", "init", path("new.db"), "--kdf", "slot-raw", "--key-env", "K"], "tooshort-zq"),
        ] {
            let result = try run(arguments, env: ["K": secret])
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.hasPrefix("fmdb-cipher: the key is not a raw key: a raw key must be 32 bytes"),
                result.stderr)
            XCTAssertFalse(result.stderr.contains(secret), result.stderr)
        }
    }

    func testKeysListOfAMissingDatabaseNamesTheDatabase() throws {
        let result = try run(["keys", "list", path("nope.db")])
        XCTAssertEqual(result.status, 66, result.stderr)
        XCTAssertTrue(result.stderr.hasPrefix("fmdb-cipher: \(path("nope.db")): "), result.stderr)
        XCTAssertFalse(result.stderr.contains("keyslots"), "the database is what is missing: \(result.stderr)")
    }

    func testUsageErrorsStartLikeEveryOtherError() throws {
        let result = try run(["sql", path("x.db"), "select 1", "--create", "--read-only"])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(
            result.stderr.hasPrefix("fmdb-cipher: --create and --read-only exclude each other"), result.stderr)
        XCTAssertFalse(result.stderr.contains("Error:"), result.stderr)
    }

    /// A library error no command puts in its own words (here: standard input is a directory, so reading the key
    /// fails with EISDIR) is said in the one style, after the command it stopped, not after "error".
    func testAnUnmappedLibraryErrorNamesTheCommand() throws {
        let db = try makeEncrypted()
        let directory = path("a-directory")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let stdinFromDirectory = ["/bin/sh", "-c", "exec \"$@\" <\"$0\"", directory]
        for command in [["sql", db, "select 1"], ["info", db], ["keys", "add", db, "--new-key-env", "N"]] {
            let result = try runTool(
                command + ["--key-stdin"], env: ["N": "a new passphrase"], wrapper: stdinFromDirectory)
            let name = command[0] == "keys" ? "keys add" : command[0]
            XCTAssertEqual(result.status, 74, "\(name): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.hasPrefix("fmdb-cipher: \(name): reading the key failed: "), "\(name): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("error:"), result.stderr)
        }
    }
}
