@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Whether a connection is keyed is SQLCipher's answer (a codec on the schema), whichever way it was keyed:
/// `setKey`, `PRAGMA key` in SQL text, or `attachDatabase` for an attached schema. Every rule that depends on
/// it (backup, cipher format, rekey, keying again) gives a connection keyed by SQL text the same answer.
final class KeyedConnectionTests: FMDBCipherTestCase {
    static let marker = "a row that must never be on disk in clear"

    /// The first 16 bytes of a plaintext SQLite file.
    static let plaintextHeader = Data("SQLite format 3\0".utf8)

    func assertNoPlaintext(at path: String, _ context: String, line: UInt = #line) {
        guard let bytes = FileManager.default.contents(atPath: path) else { return }
        XCTAssertNotEqual(bytes.prefix(16), Self.plaintextHeader, "\(context): a plaintext database", line: line)
        XCTAssertNil(bytes.range(of: Data(Self.marker.utf8)), "\(context): a row is on disk in clear", line: line)
    }

    func openDatabase(_ name: String) -> FMDatabase {
        let db = FMDatabase(path: path(name))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        return db
    }

    /// A connection keyed by `PRAGMA key` in SQL text, holding one row.
    func sqlKeyedDatabase(_ name: String) -> FMDatabase {
        let db = openDatabase(name)
        XCTAssertTrue(db.executeStatements("PRAGMA key = 'typed by hand'"), db.lastErrorMessage())
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (v TEXT)"), db.lastErrorMessage())
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (?)", Self.marker), db.lastErrorMessage())
        return db
    }

    func testABackupOfAConnectionKeyedBySQLIntoAPlaintextOneIsRefused() throws {
        let source = sqlKeyedDatabase("source.db")
        defer { source.close() }
        let destinationPath = path("plain-copy.db")
        let destination = openDatabase("plain-copy.db")
        XCTAssertThrowsError(try source.backup(to: destination)) { error in
            let ns = error as NSError
            XCTAssertEqual(ns.domain, "FMDatabase")
            XCTAssertEqual(ns.code, Int(SQLITE_MISUSE))
            XCTAssertTrue(ns.localizedDescription.contains("encrypted database into a plaintext"), "\(ns)")
        }
        destination.close()
        assertNoPlaintext(at: destinationPath, "the refused backup's destination")
    }

    func testABackupOfAPlaintextDatabaseIntoOneKeyedBySQLIsRefused() throws {
        let source = openDatabase("plain.db")
        defer { source.close() }
        XCTAssertTrue(source.executeStatements("CREATE TABLE t (v TEXT)"))
        XCTAssertTrue(source.executeUpdate("INSERT INTO t VALUES (?)", Self.marker))
        let destinationPath = path("keyed-copy.db")
        let destination = openDatabase("keyed-copy.db")
        // Keyed through the C API, and no statement of the library run since: SQLCipher is asked at the backup.
        let handle = try XCTUnwrap(destination.sqliteHandle)
        XCTAssertEqual(sqlite3_exec(OpaquePointer(handle), "PRAGMA key = 'typed by hand'", nil, nil, nil), SQLITE_OK)
        XCTAssertThrowsError(try source.backup(to: destination)) { error in
            XCTAssertEqual((error as NSError).domain, "FMDatabase")
            XCTAssertEqual((error as NSError).code, Int(SQLITE_MISUSE))
        }
        destination.close()
        assertNoPlaintext(at: destinationPath, "the refused backup's destination")
    }

    func testABackupOfAPlaintextMainSchemaBesideAnAttachedEncryptedOneIsAllowed() throws {
        let archive = try makeKeyedDatabase("archive.db", provider: PassphraseKeyProvider("archive key"))
        let source = openDatabase("plain-main.db")
        defer { source.close() }
        XCTAssertTrue(source.executeStatements("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('plain')"))
        try source.attachDatabase(atPath: archive, schema: "archive", keyProvider: PassphraseKeyProvider("archive key"))
        // The backup copies main, which is not keyed: a plaintext copy of a plaintext database.
        let destination = openDatabase("plain-main-copy.db")
        XCTAssertNoThrow(try source.backup(to: destination))
        XCTAssertEqual(destination.string(forQuery: "SELECT v FROM t"), "plain")
        destination.close()
        XCTAssertEqual(DatabaseFile.kind(atPath: path("plain-main-copy.db")), .plaintext)
    }

    func testTheCipherFormatOfAConnectionKeyedBySQLIsReported() throws {
        let db = sqlKeyedDatabase("format.db")
        defer { db.close() }
        XCTAssertEqual(db.cipherFormat, CipherFormat.linkedDefault)
        let plain = openDatabase("format-plain.db")
        defer { plain.close() }
        XCTAssertNil(plain.cipherFormat)
    }

    func testARekeyOfAConnectionKeyedBySQLSaysWhyItIsRefused() throws {
        let db = sqlKeyedDatabase("rekey.db")
        defer { db.close() }
        XCTAssertThrowsError(try db.rekey(using: PassphraseKeyProvider("new key"))) { error in
            let ns = error as NSError
            XCTAssertEqual(ns.domain, "FMDatabase")
            XCTAssertEqual(ns.code, Int(SQLITE_MISUSE))
            XCTAssertFalse(ns.localizedDescription.contains("not encrypted"), ns.localizedDescription)
            XCTAssertTrue(ns.localizedDescription.contains("PRAGMA key"), ns.localizedDescription)
        }
        XCTAssertEqual(db.string(forQuery: "SELECT v FROM t"), Self.marker, "the old key still reads it")
    }

    func testKeyingAgainAConnectionKeyedBySQLSaysItIsKeyed() throws {
        let db = sqlKeyedDatabase("key-again.db")
        defer { db.close() }
        XCTAssertFalse(db.setKey("another key"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertFalse(db.lastErrorMessage().contains("without a key"), db.lastErrorMessage())
        XCTAssertTrue(db.lastErrorMessage().contains("PRAGMA key"), db.lastErrorMessage())
        XCTAssertEqual(db.string(forQuery: "SELECT v FROM t"), Self.marker, "the first key still reads it")
    }

    func testASchemaAttachedWithAKeyBySQLHoldsTheConnectionToTheKeyedRules() throws {
        let db = openDatabase("plain-main.db")
        let encrypted = path("attached.db")
        XCTAssertTrue(db.executeStatements("ATTACH DATABASE '\(encrypted)' AS e KEY 'typed by hand'"))
        // As after attachDatabase with a key provider: SQLCipher says e has a codec.
        XCTAssertFalse(db.executeStatements("PRAGMA e.cipher_use_hmac = OFF"), "the cipher cannot be weakened")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertFalse(db.executeStatements("ATTACH DATABASE '\(path("plain.db"))' AS p KEY ''"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, "no plaintext file to copy e into")
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2", "temporary data stays in memory")
        XCTAssertTrue(db.executeUpdate("CREATE TABLE e.t (v TEXT)"), db.lastErrorMessage())
        XCTAssertTrue(db.executeUpdate("INSERT INTO e.t VALUES (?)", Self.marker), db.lastErrorMessage())
        db.close()
        guard case .encrypted = DatabaseFile.kind(atPath: encrypted) else {
            return XCTFail("the attached file is \(DatabaseFile.kind(atPath: encrypted)), not encrypted")
        }
        assertNoPlaintext(at: encrypted, "the attached database")
    }

    func testAKeyThatSQLCipherWasNotAskedAboutIsNotRememberedAsApplied() throws {
        let provider = try RawKeyProvider(key: Data(repeating: 0x42, count: 32))
        let databasePath = try makeKeyedDatabase("remembered.db", provider: provider) {
            XCTAssertTrue($0.executeUpdate("CREATE TABLE t (v)"))
        }
        let db = FMDatabase(path: databasePath)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        // An authorizer of the program's own that lets the first `PRAGMA cipher_provider` through (before the
        // key) and refuses the second (after it): the key is handed to SQLCipher, but not confirmed.
        let count = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        count.initialize(to: 0)
        defer { count.deallocate() }
        let handle = OpaquePointer(try XCTUnwrap(db.sqliteHandle))
        sqlite3_set_authorizer(
            handle,
            { context, action, first, _, _, _ in
                guard action == SQLITE_PRAGMA, let context, let first, strcmp(first, "cipher_provider") == 0 else {
                    return SQLITE_OK
                }
                let count = context.assumingMemoryBound(to: Int32.self)
                count.pointee += 1
                return count.pointee >= 2 ? SQLITE_DENY : SQLITE_OK
            }, count)
        XCTAssertThrowsError(try db.setKey(using: provider))
        db.connection?.installAuthorizer()
        // Keyed again with the same key: confirmed this time, so the keyed rules hold.
        try db.setKey(using: provider)
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
        XCTAssertFalse(db.executeUpdate("PRAGMA cipher_use_hmac = OFF"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
    }

}
