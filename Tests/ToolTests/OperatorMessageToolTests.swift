import FMDB
import Foundation
import TestSupport
import XCTest

/// Messages an operator can act on: what happened, and the next command.
final class OperatorMessageToolTests: ToolTestCase {
    func testAHexKeyTakenAsAPassphraseIsHintedToBeARawKey() throws {
        let encrypted = try makeEncrypted("raw.db", rows: 2)
        // The raw key, given without --kdf raw: taken as a passphrase, it does not open the file.
        let hex = try run(["check", encrypted, "--key-env", "K"], env: ["K": Self.rawKey])
        XCTAssertEqual(hex.status, 65, hex.stderr)
        XCTAssertTrue(hex.stderr.contains("64 hexadecimal digits"), hex.stderr)
        XCTAssertTrue(hex.stderr.contains("--kdf raw"), hex.stderr)
        XCTAssertFalse(hex.stderr.contains(Self.rawKey), "the key is never repeated")
        // A wrong passphrase that does not look like a raw key gets no such hint.
        let word = try run(["check", encrypted, "--key-env", "K"], env: ["K": "not-a-raw-key"])
        XCTAssertEqual(word.status, 65, word.stderr)
        XCTAssertFalse(word.stderr.contains("--kdf raw"), word.stderr)
        // With --kdf raw it opens.
        let right = try run(["check", encrypted, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
        XCTAssertEqual(right.status, 0, right.stderr)
    }

    /// Errors the library words for programs (SQL the keyed connection refuses, a missing slotted database)
    /// reach the operator in the tool's terms: no Swift type, method or argument label.
    func testNoMessageNamesSwiftAPI() throws {
        let encrypted = try makeEncrypted("api.db", rows: 2)
        let api = [
            #"[A-Za-z]+\([A-Za-z]*:[^)]*\)"#, #"[a-z]\(\)"#, #"KeySlots\."#, "KeySlotKeyProvider", "CipherSettings",
            "setKey", "attachDatabase", "FMDatabase", "replaceKeyProvider", "RawKeyProvider",
        ].joined(separator: "|")
        var runs: [[String]] = [
            "PRAGMA rekey = 'x'", "PRAGMA key = 'x'", "PRAGMA page_size = 8192", "ATTACH 'x.db' AS x KEY ''",
            "PRAGMA cipher_page_size = 4096", "PRAGMA cipher_default_kdf_iter = 5", "PRAGMA hexkey = 'abc'",
        ].map { ["sql", encrypted, $0, "--kdf", "raw", "--key-env", "K"] }
        runs.append(["sql", path("missing.db"), "select 1", "--kdf", "slot", "--key-env", "K", "--create"])
        for arguments in runs {
            let result = try run(arguments, env: ["K": Self.rawKey])
            XCTAssertNotEqual(result.status, 0, "\(arguments): \(result.stderr)")
            XCTAssertNil(
                result.stderr.range(of: api, options: .regularExpression), "\(arguments.dropFirst(2)): \(result.stderr)"
            )
        }
    }

    func testAKeyGivenForAPlaintextFileSaysPlaintextAndTheEncryptCommand() throws {
        let plain = try makePlaintext("plain.db", rows: 2)
        let commands: [[String]] = [
            ["check", plain], ["sql", plain, "select 1"], ["info", plain],
            ["rekey", plain, "--new-key-env", "N"], ["export", plain, path("out.db"), "--new-key-env", "N"],
        ]
        for command in commands {
            let result = try run(command + ["--key-env", "K"], env: ["K": "secret", "N": "other"])
            XCTAssertEqual(result.status, 65, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("plaintext"), "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("fmdb-cipher encrypt \(plain)"), "\(command): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("wrong key"), "\(command): \(result.stderr)")
        }
    }
}

/// `check` beside a journal or WAL: a crash's is recovered ("an interrupted write?"); a live writer's is not
/// called one.
final class LiveJournalToolTests: ToolTestCase {
    func testALiveWritersJournalIsNotCalledAnInterruptedWrite() throws {
        for mode in ["delete", "wal"] {
            let enc = try makeEncrypted("live-\(mode).db", rows: 20)
            let writer = FMDatabase(path: enc)
            XCTAssertTrue(writer.open())
            var hex = Self.rawKey
            try writer.setKey(
                using: hex.withUTF8 { try RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) })
            XCTAssertEqual(writer.string(forQuery: "PRAGMA journal_mode = \(mode)"), mode)
            // A committed write the open writer has not checkpointed: the WAL has content.
            XCTAssertTrue(writer.executeUpdate("insert into t (v) values ('committed')"))
            XCTAssertTrue(writer.executeUpdate("begin immediate"))
            XCTAssertTrue(writer.executeUpdate("insert into t (v) values ('uncommitted')"))
            XCTAssertTrue(writer.executeUpdate("update t set v = 'changed'"))
            let side = enc + (mode == "wal" ? "-wal" : "-journal")
            XCTAssertTrue(
                ((try? FileManager.default.attributesOfItem(atPath: side)[.size] as? Int) ?? 0) > 0,
                "\(mode): the writer's \(side)")
            let result = try run(["check", enc, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
            XCTAssertEqual(result.status, 0, "\(mode): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("interrupted"), "\(mode): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("another process is using"), "\(mode): \(result.stderr)")
            XCTAssertTrue(writer.rollback())
            writer.close()
        }
    }
}
