import FMDB
import Foundation
import XCTest

/// One flag language: `--kdf` goes with the key given (`--key-*`), `--new-kdf` with `--new-key-*`; the file a
/// command reads is `--cipher-page-size`, `--kdf-iter`, the file it writes the same with `new-` in front (in
/// `encrypt` too); a slot key is `slot`, `slot-raw` or `slot-recovery` everywhere. No other spelling is
/// taken: each is a usage error (64) that writes nothing.
final class ToolFlagLanguageTests: ToolTestCase {
    func testTheFlagsThatEncryptAFileOpenIt() throws {
        // 8192: the default page size of neither format (1024 for 3, 4096 for 4), so it is said on both lines.
        let plain = try makePlaintext()
        let dest = path("paged.db")
        let written = try run(
            ["encrypt", plain, dest, "--kdf", "raw", "--key-env", "K", "--new-cipher-page-size", "8192", "--quiet"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(written.status, 0, written.stderr)
        XCTAssertFalse(written.stderr.contains("deprecated"), written.stderr)
        // The one thing said: the flags that open the file (the new file's settings without new-).
        XCTAssertTrue(written.stderr.contains("--kdf raw --cipher-page-size 8192"), written.stderr)
        let read = try run(
            [
                "sql", dest, "select count(*) from t", "--csv", "--kdf", "raw", "--key-env", "K", "--cipher-page-size",
                "8192",
            ],
            env: ["K": Self.rawKey])
        XCTAssertEqual(read.status, 0, read.stderr)
        XCTAssertEqual(read.stdout, "count(*)\n50\n")
        let iterations = try run(
            ["encrypt", plain, path("iter.db"), "--key-env", "K", "--new-kdf-iter", "70000", "--quiet"],
            env: ["K": "a passphrase"])
        XCTAssertEqual(iterations.status, 0, iterations.stderr)
        XCTAssertFalse(iterations.stderr.contains("deprecated"), iterations.stderr)
        XCTAssertTrue(iterations.stderr.contains("them): --kdf-iter 70000"), iterations.stderr)
    }

    func testSpellingsThatAreNotTheCurrentOnesAreUsageErrorsThatWriteNothing() throws {
        let plain = try makePlaintext()
        let enc = try makeEncrypted()
        let slotted = path("slotted.db")
        let env = [
            "K": Self.rawKey, "N": Self.otherRawKey, "A": "an administrator's passphrase", "B": "a second passphrase",
        ]
        XCTAssertEqual(try run(["keys", "init", slotted, "--key-env", "A"], env: env).status, 0)
        let dest = path("dest.db")
        let raw = ["--kdf", "raw", "--key-env", "K", "--quiet"]
        let cases: [[String]] = [
            ["encrypt", plain, dest] + raw + ["--page-size", "4096"],
            ["encrypt", plain, dest] + raw + ["--cipher-page-size", "4096"],
            ["encrypt", plain, dest, "--key-env", "A", "--kdf-iter", "64000"],
            ["encrypt", plain, dest, "--key-env", "A", "--unsafe-kdf-iter", "64000"],
            ["export", enc, dest] + raw + ["--new-key-env", "N", "--new-page-size", "8192"],
            ["export", enc, dest] + raw + ["--new-key-env", "N", "--sqlcipher4"],
            ["keys", "init", dest, "--kdf", "raw", "--key-env", "K"],
            ["keys", "init", dest, "--kdf", "pbkdf2", "--key-env", "A"],
        ]
        for arguments in cases {
            let result = try run(arguments, env: env)
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("deprecated"), "\(arguments): \(result.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: dest), "\(arguments) wrote DEST")
        }
        let slotFile = try Data(contentsOf: URL(fileURLWithPath: slotted + "-keyslots"))
        let database = try Data(contentsOf: URL(fileURLWithPath: slotted))
        for arguments in [
            ["keys", "add", slotted, "--kdf", "pbkdf2", "--key-env", "A", "--new-key-env", "B"],
            ["keys", "add", slotted, "--kdf", "passphrase", "--key-env", "A", "--new-key-env", "B"],
            ["keys", "add", slotted, "--key-env", "A", "--new-kdf", "raw", "--new-key-env", "K"],
            ["keys", "add", slotted, "--key-env", "A", "--new-kdf", "passphrase", "--new-key-env", "B"],
            ["rekey", "--data-key", slotted, "--kdf", "raw", "--key-env", "K"],
        ] {
            let result = try run(arguments, env: env)
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderr)")
            XCTAssertEqual(
                try Data(contentsOf: URL(fileURLWithPath: slotted + "-keyslots")), slotFile, "\(arguments)")
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: slotted)), database, "\(arguments)")
        }
    }

    func testRekeyDataKeyRefusesAKDFThatOpensNoSlot() throws {
        let plain = try makePlaintext(rows: 5)
        let db = path("slotted.db")
        let env = ["K": "an administrator's passphrase"]
        XCTAssertEqual(
            try run(["encrypt", plain, db, "--kdf", "slot", "--key-env", "K", "--quiet"], env: env).status, 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        for kdf in ["raw", "scrypt", "pbkdf2", "pbkdf2-sqlcipher"] {
            let refused = try run(["rekey", "--data-key", db, "--kdf", kdf, "--key-env", "K"], env: env)
            XCTAssertEqual(refused.status, 64, "\(kdf): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("unlocks a key slot"), refused.stderr)
        }
        let newKDF = try run(["rekey", "--data-key", db, "--new-kdf", "raw", "--key-env", "K"], env: env)
        XCTAssertEqual(newKDF.status, 64, newKDF.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: db)), before, "not rotated")
        let rotated = try run(["rekey", "--data-key", db, "--kdf", "slot", "--key-env", "K", "--quiet"], env: env)
        XCTAssertEqual(rotated.status, 0, rotated.stderr)
    }

    func testKeysSaysWhereTheSettingsOfADatabaseBelong() throws {
        let db = path("slotted.db")
        let env = ["A": "an administrator's passphrase", "B": "a second long passphrase"]
        XCTAssertEqual(try run(["keys", "init", db, "--key-env", "A"], env: env).status, 0)
        // Settings keys never used: what to use instead.
        for option in ["--cipher-page-size", "--kdf-iter"] {
            let refused = try run(
                ["keys", "add", db, "--key-env", "A", "--new-key-env", "B", option, "4096"], env: env)
            XCTAssertEqual(refused.status, 64, refused.stderr)
            XCTAssertTrue(refused.stderr.contains("keys takes no \(option)"), refused.stderr)
            XCTAssertTrue(refused.stderr.contains("(sql, info, export ...)"), refused.stderr)
        }
    }

    func testExportNewPageSizeIsTheSourcesNameWithNewInFront() throws {
        let enc = try makeEncrypted()
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let current = try run(
            [
                "export", enc, path("a.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N",
                "--new-cipher-page-size", "8192", "--quiet",
            ], env: env)
        XCTAssertEqual(current.status, 0, current.stderr)
        XCTAssertFalse(current.stderr.contains("deprecated"), current.stderr)
        XCTAssertTrue(current.stderr.contains("--kdf raw --cipher-page-size 8192"), current.stderr)
        let read = try run(
            [
                "sql", path("a.db"), "select count(*) from t", "--csv", "--kdf", "raw", "--key-env", "N",
                "--cipher-page-size", "8192",
            ], env: env)
        XCTAssertEqual(read.stdout, "count(*)\n50\n", read.stderr)
    }

    func testARawKeySlotIsSlotRawInEveryCommand() throws {
        let db = path("slotted.db")
        let env = ["A": Self.rawKey, "B": Self.otherRawKey, "P": "a passphrase for slot three"]
        let created = try run(["keys", "init", db, "--kdf", "slot-raw", "--key-env", "A"], env: env)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertFalse(created.stderr.contains("deprecated"), created.stderr)
        let added = try run(
            ["keys", "add", db, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "slot-raw", "--new-key-env", "B"],
            env: env)
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertTrue(added.stderr.contains("raw"), "a raw-key slot: \(added.stderr)")
        XCTAssertFalse(added.stderr.contains("deprecated"), added.stderr)
        let opened = try run(
            ["sql", db, "select 1", "--csv", "--kdf", "slot-raw", "--key-env", "B"], env: env)
        XCTAssertEqual(opened.status, 0, opened.stderr)

    }

    func testEachSubcommandListsOnlyTheKDFValuesItAccepts() throws {
        // Help wraps lines: compare with runs of white space made one space.
        func help(_ arguments: [String]) throws -> String {
            try run(arguments + ["--help"]).stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        let initHelp = try help(["keys", "init"])
        XCTAssertTrue(initHelp.contains("(values: slot, slot-raw; default: slot)"), initHelp)
        XCTAssertFalse(initHelp.contains("pbkdf2-sqlcipher"), initHelp)
        XCTAssertFalse(
            initHelp.contains("--cipher-page-size"), "a slotted database's settings are its own: \(initHelp)")
        let addHelp = try help(["keys", "add"])
        XCTAssertTrue(addHelp.contains("(values: slot, slot-raw, slot-recovery)"), addHelp)
        XCTAssertTrue(addHelp.contains("found from the slot kinds the slot file holds"), addHelp)
        XCTAssertTrue(addHelp.contains("(values: slot, slot-raw; default: slot)"), "--new-kdf: \(addHelp)")
        let encryptHelp = try help(["encrypt"])
        XCTAssertTrue(
            encryptHelp.contains(
                "(values: passphrase, pbkdf2-sqlcipher, pbkdf2, scrypt, raw, slot, slot-raw; default: passphrase)"),
            "recovery keys are generated, never given to encrypt: \(encryptHelp)")
        let recovery = try run(
            ["encrypt", try makePlaintext(), path("r.db"), "--kdf", "slot-recovery", "--key-env", "A"], env: ["A": "a"])
        XCTAssertEqual(recovery.status, 64, recovery.stderr)
        let refused = try run(["keys", "init", path("x.db"), "--kdf", "pbkdf2", "--key-env", "A"], env: ["A": "a"])
        XCTAssertEqual(refused.status, 64, refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("x.db")))

        // Every command that opens an existing encrypted file takes every kind of key that can open one.
        let opening =
            "(values: passphrase, pbkdf2-sqlcipher, pbkdf2, scrypt, raw, slot, slot-raw, slot-recovery; default: "
            + "passphrase)"
        for command in ["rekey", "export", "decrypt", "info", "sql", "check", "migrate"] {
            XCTAssertTrue(try help([command]).contains(opening), "\(command) --kdf")
        }
        // A file rekeyed under a new key has one key, no slots: the slot kinds are not listed, and are refused.
        // A copy (export --new-kdf) may get new key slots (slot, slot-raw); a recovery key is generated, never
        // given.
        let singleKey = "passphrase, pbkdf2-sqlcipher, pbkdf2, scrypt, raw"
        for (command, listed) in [("rekey", singleKey), ("export", singleKey + ", slot, slot-raw")] {
            let text = try help([command])
            XCTAssertTrue(text.contains("(values: \(listed))"), "\(command) --new-kdf: \(text)")
            let newKDF = try XCTUnwrap(text.components(separatedBy: "--new-kdf <new-kdf>").last, text)
            let values = try XCTUnwrap(newKDF.range(of: "(values: "), newKDF)
            let list = newKDF[values.lowerBound...].prefix { $0 != ")" }
            XCTAssertFalse(list.contains("slot-recovery"), "\(command) --new-kdf lists no recovery kind: \(list)")
            XCTAssertEqual(list.contains("slot"), command == "export", "\(command) --new-kdf: \(list)")
        }
        let enc = try makeEncrypted()
        let rekeyToSlot = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "A", "--new-kdf", "slot", "--new-key-env", "B"],
            env: ["A": Self.rawKey, "B": "a long enough passphrase"])
        XCTAssertEqual(rekeyToSlot.status, 64, rekeyToSlot.stderr)
        XCTAssertEqual(rowCount(enc, rawKey: Self.rawKey), 50, "not rekeyed")

        let completion = try run(["--generate-completion-script", "bash"]).stdout
        XCTAssertTrue(
            completion.contains("-W 'slot'$'\\n''slot-raw'$'\\n''slot-recovery'"), "completions follow the same lists")
        XCTAssertTrue(
            completion.contains(
                "'--new-kdf')\n        __fmdb-cipher_add_completions -W "
                    + "'passphrase'$'\\n''pbkdf2-sqlcipher'$'\\n''pbkdf2'$'\\n''scrypt'$'\\n''raw'\n"
            ),
            "rekey's --new-kdf completes the single-key kinds only")
        XCTAssertTrue(
            completion.contains(
                "'--new-kdf')\n        __fmdb-cipher_add_completions -W "
                    + "'passphrase'$'\\n''pbkdf2-sqlcipher'$'\\n''pbkdf2'$'\\n''scrypt'$'\\n''raw'$'\\n''slot'$'\\n'"
                    + "'slot-raw'\n"
            ),
            "export's --new-kdf completes the single-key and the new-slot kinds")
    }

    func testHelpShowsTheCurrentSpellingsOnly() throws {
        let top = try run(["--help"]).stdout
        XCTAssertTrue(top.contains("--key-credential"), top)
        // The rule, stated once for every command.
        let rule = top.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertTrue(
            rule.contains(
                "--cipher-page-size and --kdf-iter describe the file a command reads, --new-cipher-page-size and "
                    + "--new-kdf-iter the file it writes"), top)
        let encrypt = try run(["encrypt", "--help"]).stdout
        XCTAssertTrue(encrypt.contains("--new-cipher-page-size <BYTES>"), encrypt)
        XCTAssertTrue(encrypt.contains("--new-kdf-iter <N>"), encrypt)
        XCTAssertTrue(encrypt.contains("--unsafe-new-kdf-iter <N>"), encrypt)
        // Old spellings are named only as old ones: never an option of its own in the help.
        for old in ["--page-size", "--cipher-page-size <", "--kdf-iter <", "--unsafe-kdf-iter"] {
            XCTAssertFalse(encrypt.contains("  \(old)"), "\(old): \(encrypt)")
        }
        XCTAssertFalse(encrypt.contains("(--kdf, --page-size"), encrypt)
        let export = try run(["export", "--help"]).stdout
        XCTAssertTrue(export.contains("--new-cipher-page-size"), export)
        XCTAssertFalse(export.contains("  --new-page-size"), export)
        // No help names a spelling the tool no longer takes.
        for command in [["encrypt"], ["export"], ["rekey"], ["keys"], ["keys", "init"], ["keys", "add"], []] {
            let help = try run(command + ["--help"]).stdout
            for removed in ["deprecat", "--page-size", "--new-page-size", "--unsafe-kdf-iter", "--sqlcipher4"] {
                XCTAssertFalse(help.contains(removed), "\(command) --help names \(removed): \(help)")
            }
        }
    }
}
