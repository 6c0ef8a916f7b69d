@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A program that goes on after `setKey(using:)` threw on a new database must not write it in plaintext:
/// the connection runs nothing but a key until it is keyed (Core/KeyedAuthorizer.swift, `requiresKey`).
final class FailedKeyLockoutTests: FMDBCipherTestCase {
    /// A provider that cannot give a key (a missing secret, a slot file that does not open, ...).
    struct FailingProvider: KeyProvider {
        func key(for request: KeyRequest) throws -> DatabaseKey {
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "the secret is not there")
        }
    }

    func provider() throws -> RawKeyProvider { try RawKeyProvider(key: Data(repeating: 0x5A, count: 32)) }

    func failedKeyOnNewFile(_ name: String) throws -> (FMDatabase, String) {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(try db.setKey(using: FailingProvider())) {
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_CANTOPEN))
        }
        return (db, path)
    }

    func testNothingRunsAfterAFailedKeyOnANewFileUntilItIsKeyed() throws {
        let (db, path) = try failedKeyOnNewFile("new.db")
        defer { db.close() }
        XCTAssertFalse(db.executeUpdate("CREATE TABLE secrets (v TEXT)"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(db.lastErrorMessage().contains("setKey(using:) failed"))
        XCTAssertFalse(db.executeStatements("CREATE TABLE s (v); INSERT INTO s VALUES ('x')"))
        XCTAssertNil(db.executeQuery("SELECT 1"))
        XCTAssertTrue(DatabaseFile.kind(atPath: path).isNew, "nothing was written")

        // Keyed after all: everything runs, encrypted.
        try db.setKey(using: provider())
        XCTAssertTrue(db.executeUpdate("CREATE TABLE secrets (v TEXT)"))
        XCTAssertTrue(db.executeUpdate("INSERT INTO secrets VALUES ('swordfish')"))
        guard case .encrypted = DatabaseFile.kind(atPath: path) else {
            return XCTFail("the file is \(DatabaseFile.kind(atPath: path)), not encrypted")
        }
    }

    func testASQLKeyPragmaStillKeysTheConnection() throws {
        let (db, path) = try failedKeyOnNewFile("pragma.db")
        defer { db.close() }
        XCTAssertTrue(db.executeStatements("PRAGMA key = 'an FMDB-style passphrase'"))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (v)"))
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (1)"))
        guard case .encrypted = DatabaseFile.kind(atPath: path) else {
            return XCTFail("the file is \(DatabaseFile.kind(atPath: path)), not encrypted")
        }
    }

    func testKeyingAnAttachedDatabaseDoesNotLiftIt() throws {
        let (db, path) = try failedKeyOnNewFile("main-of-attach.db")
        defer { db.close() }
        try db.attachDatabase(atPath: directory.path("archive.db"), schema: "a", keyProvider: provider())
        // main is still unencrypted: a write to it would be plaintext.
        XCTAssertFalse(db.executeUpdate("CREATE TABLE t (v TEXT)"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(DatabaseFile.kind(atPath: path).isNew, "nothing was written")
    }

    func testReopeningClearsIt() throws {
        let (db, path) = try failedKeyOnNewFile("reopen.db")
        db.close()
        XCTAssertTrue(db.open())
        defer { db.close() }
        // A plaintext database, chosen explicitly by opening without a key.
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (v)"))
        XCTAssertEqual(DatabaseFile.kind(atPath: path), .plaintext)
    }

    func testAWrongKeyToAnExistingFileStillReadsAsNotADatabase() throws {
        let path = directory.path("existing.db")
        let writer = FMDatabase(path: path)
        XCTAssertTrue(writer.open())
        try writer.setKey(using: provider())
        XCTAssertTrue(writer.executeUpdate("CREATE TABLE t (v)"))
        writer.close()

        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertThrowsError(try db.setKey(using: RawKeyProvider(key: Data(repeating: 1, count: 32))))
        XCTAssertNil(db.executeQuery("SELECT * FROM t"))
        XCTAssertEqual(
            db.lastErrorCode(), SQLITE_NOTADB, "unchanged: an existing encrypted file cannot be written without its key"
        )
    }
}
