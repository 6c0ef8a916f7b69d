import FMDB
import Foundation
import TestSupport
import XCTest

/// The settings SQLCipher lets an app choose, in `CipherSettings`: checked before SQLCipher sees them,
/// applied after the key where the linked SQLCipher has them (asked of it), refused with code 24 where not.
final class CipherSettingsChoiceTests: FMDBCipherTestCase {
    func testMalformedChoicesAreRefusedBeforeSQLCipherSeesThem() {
        for settings in [
            CipherSettings(salt: Data(repeating: 1, count: 15)), CipherSettings(plaintextHeaderSize: 33),
            CipherSettings(plaintextHeaderSize: 2048), CipherSettings(plaintextHeaderSize: -16),
        ] {
            XCTAssertThrowsError(try settings.validate()) { XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE)) }
        }
        XCTAssertNoThrow(try CipherSettings(plaintextHeaderSize: 32, salt: Data(repeating: 1, count: 16)).validate())
    }

    /// A plaintext header without its salt is refused before SQLCipher sees it: SQLCipher would write the new
    /// file under a random salt it keeps nowhere, and no later open could read it.
    func testAPlaintextHeaderWithoutItsSaltIsRefused() throws {
        XCTAssertThrowsError(try CipherSettings(plaintextHeaderSize: 32).validate()) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertNoThrow(try CipherSettings(plaintextHeaderSize: 0).validate())
        let file = path("header-without-salt.db")
        let db = FMDatabase(path: file)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(
            try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(plaintextHeaderSize: 32))
        ) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_MISUSE), "\(error)")
            XCTAssertEqual(nsError(error).domain, "FMDatabase", "\(error)")
            XCTAssertTrue("\(error)".contains("salt"), "\(error)")
        }
        XCTAssertFalse(db.executeUpdate("CREATE TABLE t (a)"), "nothing is written in plaintext")
        db.close()
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        XCTAssertEqual(size, 0, "no file with a salt kept nowhere")
    }

    /// What the running SQLCipher answers on a keyed connection decides, never its version number.
    func testEachChoiceIsAppliedWhereTheLinkedSQLCipherHasItAndRefusedWhereNot() throws {
        let probe = FMDatabase(path: nil)
        XCTAssertTrue(probe.open())
        try probe.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        let choices: [(pragma: String, settings: CipherSettings)] = [
            ("cipher_hmac_algorithm", CipherSettings(hmacAlgorithm: .sha256)),
            ("cipher_kdf_algorithm", CipherSettings(kdfAlgorithm: .pbkdf2SHA256)),
            (
                "cipher_plaintext_header_size",
                CipherSettings(plaintextHeaderSize: 32, salt: Data(repeating: 8, count: 16))
            ),
            ("cipher_salt", CipherSettings(salt: Data(repeating: 9, count: 16))),
            ("cipher_use_hmac", CipherSettings(usesHMAC: true)),
        ]
        for (index, choice) in choices.enumerated() {
            let linkedHasIt = probe.string(forQuery: "PRAGMA \(choice.pragma)") != nil
            let db = FMDatabase(path: path("choice\(index).db"))
            db.logsErrors = false
            XCTAssertTrue(db.open())
            defer { db.close() }
            let keyed = Result { try db.setKey(using: PassphraseKeyProvider("choice"), settings: choice.settings) }
            if linkedHasIt {
                XCTAssertNoThrow(try keyed.get(), choice.pragma)
                XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"), choice.pragma)
            } else {
                XCTAssertThrowsError(try keyed.get(), choice.pragma) { error in
                    XCTAssertEqual(nsError(error).code, Int(SQLITE_FORMAT), "\(choice.pragma): \(error)")
                    XCTAssertTrue("\(error)".contains("SQLCipher 4"), "\(error)")
                }
                XCTAssertFalse(db.executeUpdate("CREATE TABLE t (a)"), "nothing is written in plaintext")
            }
        }
        probe.close()
    }

    /// A file the shell wrote with `cipher_use_hmac = OFF` and SQLCipher's other defaults (no format of its
    /// own) opens with `usesHMAC: false`, and reads as a wrong key without it.
    func testAFileWithoutPageHMACsOpensWhenTheSettingsSaySo() throws {
        guard let shell = ProcessInfo.processInfo.environment["FMDB_SQLCIPHER3_SHELL"],
            FileManager.default.isExecutableFile(atPath: shell)
        else { throw XCTSkip("FMDB_SQLCIPHER3_SHELL (a SQLCipher 3 sqlcipher shell) is not set") }
        let file = path("nohmac.db")
        let made = try runSQLCipherShell(
            shell, file,
            "PRAGMA key = 'k';\nPRAGMA cipher_use_hmac = OFF;\nCREATE TABLE t (a);\nINSERT INTO t VALUES (4);\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        let db = FMDatabase(path: file)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("k"))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_NOTADB))
        }
        try db.setKey(using: PassphraseKeyProvider("k"), settings: CipherSettings(usesHMAC: false))
        XCTAssertEqual(db.int(forQuery: "SELECT a FROM t"), 4)
    }
}
