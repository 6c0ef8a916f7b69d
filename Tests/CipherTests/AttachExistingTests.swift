@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// `attachDatabase(atPath:schema:keyProvider:settings:)` of a file that already exists and is encrypted:
/// SQLite reads its schema inside ATTACH, so the key and the cipher settings must be there at that moment
/// (before, such an attach always failed with SQLITE_NOTADB).
final class AttachExistingTests: FMDBCipherTestCase {
    /// An encrypted file at `name` holding table `other` with `rows` rows, written with `provider` and `settings`.
    func makeEncryptedFile(
        _ name: String, provider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        rows: Int = 3
    ) throws -> String {
        try makeKeyedDatabase(name, provider: provider, settings: settings) { db in
            XCTAssertTrue(db.executeUpdate("CREATE TABLE other (id INTEGER PRIMARY KEY, v TEXT)"))
            for i in 0..<rows { XCTAssertTrue(db.executeUpdate("INSERT INTO other (v) VALUES (?)", "other \(i)")) }
        }
    }

    func defaults(_ db: FMDatabase) -> [String?] {
        ["cipher_default_kdf_iter", "cipher_default_page_size", "cipher_default_use_hmac"].map {
            db.string(forQuery: "PRAGMA \($0)")
        }
    }

    func schemas(_ db: FMDatabase) -> [String] {
        var names: [String] = []
        if let rs = db.executeQuery("PRAGMA database_list") {
            while rs.next() { names.append(rs.string(forColumn: "name") ?? "") }
        }
        return names
    }

    func testAnExistingEncryptedFileAttachesToAKeyedMainDatabaseAndJoins() throws {
        let otherPath = try makeEncryptedFile("other.db", provider: PassphraseKeyProvider("other passphrase"))
        let db = FMDatabase(path: directory.path("main.db"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: RawKeyProvider(key: Data(repeating: 0x42, count: 32)))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (id INTEGER PRIMARY KEY, w TEXT)"))
        XCTAssertTrue(db.executeUpdate("INSERT INTO t (id, w) VALUES (1, 'main 1')"))

        try db.attachDatabase(atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("other passphrase"))
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM o.other"), 3)
        XCTAssertEqual(
            db.string(forQuery: "SELECT t.w || '/' || o.other.v FROM t JOIN o.other ON o.other.id = t.id"),
            "main 1/other 0")
        XCTAssertTrue(db.executeUpdate("INSERT INTO o.other (v) VALUES ('written through the attachment')"))
        try db.detachDatabase(schema: "o")

        // The write landed, encrypted under the attached file's own key.
        XCTAssertNotEqual(DatabaseFile.kind(atPath: otherPath), .plaintext)
        let check = FMDatabase(path: otherPath)
        XCTAssertTrue(check.open())
        defer { check.close() }
        try check.setKey(using: PassphraseKeyProvider("other passphrase"))
        XCTAssertEqual(check.int(forQuery: "SELECT count(*) FROM other"), 4)
    }

    func testAnExistingEncryptedFileAttachesToAPlaintextMainDatabase() throws {
        let otherPath = try makeEncryptedFile("other.db", provider: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        let db = FMDatabase(path: directory.path("plain.db"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.attachDatabase(
            atPath: otherPath, schema: "o", keyProvider: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM o.other"), 3)
        XCTAssertEqual(
            db.string(forQuery: "PRAGMA temp_store"), "2", "temporary data of the encrypted schema stays in memory")
    }

    func testAWrongKeyIsNotADatabaseAndLeavesNothingAttached() throws {
        let otherPath = try makeEncryptedFile("other.db", provider: PassphraseKeyProvider("right"))
        let before = try Data(contentsOf: URL(fileURLWithPath: otherPath))
        let db = FMDatabase(path: directory.path("main.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        let defaultsBefore = defaults(db)
        XCTAssertThrowsError(
            try db.attachDatabase(atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("wrong"))
        ) {
            XCTAssertEqual(($0 as NSError).domain, FMDatabaseError.domain)
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_NOTADB))
        }
        XCTAssertEqual(schemas(db), ["main"], "a failed attach is undone")
        XCTAssertEqual(defaults(db), defaultsBefore)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: otherPath)), before, "the file was not written")
        // The right key still attaches on the same connection.
        try db.attachDatabase(atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("right"))
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM o.other"), 3)
    }

    func testAFileWithCustomSettingsIsRefusedWithFormatAndTheDefaultsNeverChange() throws {
        let settings = CipherSettings(pageSize: 8192, kdfIterations: 70_000)
        let otherPath = try makeEncryptedFile("custom.db", provider: PassphraseKeyProvider("p"), settings: settings)
        let db = FMDatabase(path: directory.path("main.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        let defaultsBefore = defaults(db)
        // The right key with the file's settings: SQLITE_FORMAT, saying what the file needs. Without them
        // the file reads as no database at all (as setKey(using:) without them).
        for (attempt, code) in [(settings, SQLITE_FORMAT), (CipherSettings(), SQLITE_NOTADB)] {
            XCTAssertThrowsError(
                try db.attachDatabase(
                    atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("p"),
                    settings: attempt)
            ) {
                XCTAssertEqual(($0 as NSError).code, Int(code))
                if code == SQLITE_FORMAT {
                    XCTAssertTrue(
                        ($0 as NSError).localizedDescription.contains("cipher_page_size 8192, kdf_iter 70000"))
                }
            }
            XCTAssertEqual(schemas(db), ["main"])
            XCTAssertEqual(defaults(db), defaultsBefore, "SQLCipher's process-wide defaults are never changed")
        }
        // A wrong key to the same file is still "not a database".
        XCTAssertThrowsError(
            try db.attachDatabase(
                atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("q"),
                settings: settings)
        ) {
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_NOTADB))
        }
        // Explicit settings that equal the defaults attach as no settings do.
        let plainPath = try makeEncryptedFile("default.db", provider: PassphraseKeyProvider("d"))
        let linked = CipherFormat.linkedDefault
        try db.attachDatabase(
            atPath: plainPath, schema: "d", keyProvider: PassphraseKeyProvider("d"),
            settings: CipherSettings(
                pageSize: linked == .v4 ? 4096 : 1024, kdfIterations: linked.kdfIterations, format: linked))
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM d.other"), 3)
    }

    func testAFileInTheOlderFormatIsRefusedWithFormat() throws {
        try XCTSkipUnless(
            SQLCipherRuntime.majorVersion >= 4, "SQLCipher 3.4.1 writes format 3 by default: nothing older to find")
        let otherPath = try makeEncryptedFile(
            "v3.db", provider: PassphraseKeyProvider("p"), settings: CipherSettings(format: .v3))
        let db = FMDatabase(path: directory.path("main.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertThrowsError(
            try db.attachDatabase(atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("p"))
        ) {
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_FORMAT))
            XCTAssertTrue(($0 as NSError).localizedDescription.contains("format 3"))
        }
        XCTAssertEqual(schemas(db), ["main"])
    }

    func testAnExistingAttachmentIsGuardedLikeAKeyedDatabase() throws {
        let otherPath = try makeEncryptedFile("other.db", provider: PassphraseKeyProvider("p"))
        let db = FMDatabase(path: directory.path("main.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.attachDatabase(atPath: otherPath, schema: "o", keyProvider: PassphraseKeyProvider("p"))
        XCTAssertFalse(db.executeStatements("PRAGMA o.rekey = 'weaker'"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertFalse(db.executeStatements("ATTACH DATABASE '\(directory.path("x.db"))' AS x KEY ''"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
    }
}
