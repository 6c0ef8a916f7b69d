import FMDB
import Foundation
import XCTest

/// One flag language: `--kdf` goes with the key given (`--key-*`), `--new-kdf` with `--new-key-*`; the file a
/// command reads is `--cipher-page-size`, `--kdf-iter`, the file it writes the same with `new-` in front (in
/// `encrypt` too); a slot key is `slot`, `slot-raw` or `slot-recovery` everywhere. Old spellings work, with a
/// warning, or are refused saying what to use.
final class ToolFlagLanguageTests: ToolTestCase {
    private func deprecationWarning(_ old: String, _ new: String) -> String {
        "fmdb-cipher: warning: \(old) is deprecated and will be removed in the next release; use \(new)"
    }

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

    func testEncryptsOldSettingSpellingsStillWorkWithADeprecationWarning() throws {
        let plain = try makePlaintext()
        for (old, new, value) in [
            ("--page-size", "--new-cipher-page-size", "4096"), ("--cipher-page-size", "--new-cipher-page-size", "4096"),
            ("--kdf-iter", "--new-kdf-iter", "64000"), ("--unsafe-kdf-iter", "--unsafe-new-kdf-iter", "64000"),
        ] {
            let dest = path("old\(old).db")
            let result = try run(
                ["encrypt", plain, dest, "--kdf", "raw", "--key-env", "K", old, value, "--quiet"],
                env: ["K": Self.rawKey])
            XCTAssertEqual(result.status, 0, "\(old): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(deprecationWarning(old, new)), "\(old): \(result.stderr)")
            // The value reached DEST: the flags said back open it.
            let reopen = old.hasSuffix("page-size") ? ["--cipher-page-size", value] : []
            let check = try run(["check", dest, "--kdf", "raw", "--key-env", "K"] + reopen, env: ["K": Self.rawKey])
            XCTAssertEqual(check.status, 0, "\(old): \(check.stderr)")
        }
        for pair in [["--page-size", "--new-cipher-page-size"], ["--cipher-page-size", "--new-cipher-page-size"]] {
            let both = try run(
                ["encrypt", plain, path("both.db"), "--kdf", "raw", "--key-env", "K"]
                    + pair.flatMap { [$0, "4096"] }, env: ["K": Self.rawKey])
            XCTAssertEqual(both.status, 64, both.stderr)
            XCTAssertTrue(both.stderr.contains("give --new-cipher-page-size only"), both.stderr)
        }
    }

    func testExportSQLCipher4IsADeprecatedSpellingOfFormat4() throws {
        let help = try run(["export", "--help"]).stdout
        XCTAssertFalse(help.contains("--sqlcipher4"), help)
        let enc = try makeEncrypted()
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let both = try run(
            [
                "export", enc, path("both.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--format", "3",
                "--sqlcipher4",
            ], env: env)
        XCTAssertEqual(both.status, 64, both.stderr)
        XCTAssertTrue(both.stderr.contains("give --format 4 only"), both.stderr)
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { return }
        let old = try run(
            [
                "export", enc, path("v4.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--sqlcipher4",
                "--quiet",
            ], env: env)
        XCTAssertEqual(old.status, 0, old.stderr)
        XCTAssertTrue(old.stderr.contains(deprecationWarning("--sqlcipher4", "--format 4")), old.stderr)
        XCTAssertEqual(rowCount(path("v4.db"), rawKey: Self.otherRawKey), 50)
    }

    func testRekeyDataKeyRefusesAKDFThatOpensNoSlot() throws {
        let plain = try makePlaintext(rows: 5)
        let db = path("slotted.db")
        let env = ["K": "an administrator's passphrase"]
        XCTAssertEqual(
            try run(["encrypt", plain, db, "--kdf", "slot", "--key-env", "K", "--quiet"], env: env).status, 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        for kdf in ["scrypt", "pbkdf2", "pbkdf2-sqlcipher"] {
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

    func testKeysSpellingsOfAnEarlierReleaseAreDeprecatedOrSayWhatToUse() throws {
        let db = path("slotted.db")
        let env = ["A": "an administrator's passphrase", "B": "a second long passphrase", "C": "a third long one"]
        XCTAssertEqual(try run(["keys", "init", db, "--key-env", "A"], env: env).status, 0)
        // A single-key KDF named the unlocking passphrase (the slot's own KDF derives it): deprecated, works.
        for (kdf, secret) in [("pbkdf2", "B"), ("scrypt", "C")] {
            let added = try run(
                ["keys", "add", db, "--kdf", kdf, "--key-env", "A", "--new-key-env", secret], env: env)
            XCTAssertEqual(added.status, 0, "\(kdf): \(added.stderr)")
            XCTAssertTrue(added.stderr.contains(deprecationWarning("--kdf \(kdf)", "--kdf slot")), added.stderr)
        }
        // For a new slot it named no slot KDF (--slot-kdf did): refused, saying what to use.
        let initRefused = try run(["keys", "init", path("x.db"), "--kdf", "pbkdf2", "--key-env", "A"], env: env)
        XCTAssertEqual(initRefused.status, 64, initRefused.stderr)
        XCTAssertTrue(initRefused.stderr.contains("--kdf pbkdf2 is not a kind of slot key"), initRefused.stderr)
        XCTAssertTrue(initRefused.stderr.contains("--slot-kdf scrypt or pbkdf2"), initRefused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("x.db")))
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
        let old = try run(
            [
                "export", enc, path("b.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N",
                "--new-page-size", "8192", "--quiet",
            ], env: env)
        XCTAssertEqual(old.status, 0, old.stderr)
        XCTAssertTrue(old.stderr.contains(deprecationWarning("--new-page-size", "--new-cipher-page-size")), old.stderr)
        for copy in ["a.db", "b.db"] {
            let read = try run(
                [
                    "sql", path(copy), "select count(*) from t", "--csv", "--kdf", "raw", "--key-env", "N",
                    "--cipher-page-size", "8192",
                ], env: env)
            XCTAssertEqual(read.stdout, "count(*)\n50\n", "\(copy): \(read.stderr)")
        }
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

        // The spellings of the last release: keys init --kdf raw, keys add --new-kdf raw (and --kdf raw).
        let old = path("old.db")
        let oldInit = try run(["keys", "init", old, "--kdf", "raw", "--key-env", "A"], env: env)
        XCTAssertEqual(oldInit.status, 0, oldInit.stderr)
        XCTAssertTrue(oldInit.stderr.contains(deprecationWarning("--kdf raw", "--kdf slot-raw")), oldInit.stderr)
        let oldAdd = try run(
            ["keys", "add", old, "--kdf", "raw", "--key-env", "A", "--new-kdf", "raw", "--new-key-env", "B"], env: env)
        XCTAssertEqual(oldAdd.status, 0, oldAdd.stderr)
        XCTAssertTrue(oldAdd.stderr.contains(deprecationWarning("--new-kdf raw", "--new-kdf slot-raw")), oldAdd.stderr)
        XCTAssertEqual(
            try run(["sql", old, "select 1", "--kdf", "slot-raw", "--key-env", "B"], env: env).status, 0)
        let rotated = try run(
            ["rekey", "--data-key", old, "--kdf", "raw", "--key-env", "A", "--drop-other-slots", "--quiet"], env: env)
        XCTAssertEqual(rotated.status, 0, rotated.stderr)
        XCTAssertTrue(
            rotated.stderr.contains(deprecationWarning("rekey --data-key --kdf raw", "--kdf slot-raw")), rotated.stderr)
        let passphrase = try run(
            [
                "keys", "add", old, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "passphrase", "--new-key-env",
                "P",
            ],
            env: env)
        XCTAssertEqual(passphrase.status, 0, passphrase.stderr)
        XCTAssertTrue(
            passphrase.stderr.contains(deprecationWarning("--new-kdf passphrase", "--new-kdf slot")), passphrase.stderr)
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
    }
}
