import FMDB
import Foundation
import TestSupport
import XCTest

/// The salt given in `CipherSettings` is the salt every key is made over: a library KDF derives over it on a
/// new file and on a rekey, and a raw key that carries another salt is refused. A file with a plaintext header
/// does not hold its salt, so any other salt would leave it unreadable.
final class PlaintextHeaderSaltTests: FMDBCipherTestCase {
    let salt = Data((0..<16).map { UInt8($0 * 3 + 1) })

    var settings: CipherSettings { CipherSettings(plaintextHeaderSize: 32, salt: salt) }

    /// Plaintext headers are asked of the running SQLCipher: a keyed connection answers the PRAGMA or not.
    func requirePlaintextHeaders() throws {
        let probe = FMDatabase(path: nil)
        XCTAssertTrue(probe.open())
        defer { probe.close() }
        try probe.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        guard probe.string(forQuery: "PRAGMA cipher_plaintext_header_size") != nil else {
            throw XCTSkip("the running SQLCipher (\(probe.cipherVersion ?? "?")) has no plaintext headers")
        }
    }

    func opened(_ file: String, _ provider: any KeyProvider) throws -> FMDatabase {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        try db.setKey(using: provider, settings: settings)
        return db
    }

    func testALibraryKDFWritesAndRekeysUnderTheGivenSalt() throws {
        try requirePlaintextHeaders()
        let file = path("header-kdf.db")
        let db = try opened(file, PBKDF2KeyProvider(passphrase: "old"))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (7)"))
        db.close()
        let again = try opened(file, PBKDF2KeyProvider(passphrase: "old"))
        XCTAssertEqual(again.int(forQuery: "SELECT a FROM t"), 7)
        try again.rekey(using: ScryptKeyProvider(passphrase: "new"))
        again.close()
        let rekeyed = try opened(file, ScryptKeyProvider(passphrase: "new"))
        XCTAssertEqual(rekeyed.int(forQuery: "SELECT a FROM t"), 7, "reopens with the given salt after the rekey")
        rekeyed.close()
    }

    func testARawKeyWithAnotherSaltIsRefused() throws {
        try requirePlaintextHeaders()
        let key = Data(repeating: 5, count: 32)
        let other = Data(repeating: 9, count: 16)
        let file = path("header-raw.db")
        let refused = FMDatabase(path: file)
        refused.logsErrors = false
        XCTAssertTrue(refused.open())
        XCTAssertThrowsError(try refused.setKey(using: SaltedRawKey(key: key, salt: other), settings: settings)) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), "\($0)")
        }
        refused.close()
        let db = try opened(file, SaltedRawKey(key: key, salt: salt))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertThrowsError(try db.rekey(using: SaltedRawKey(key: Data(repeating: 6, count: 32), salt: other))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), "\($0)")
        }
        let literal = "x'" + String(repeating: "06", count: 32) + String(repeating: "09", count: 16) + "'"
        XCTAssertFalse(db.rekeyWith(Data(literal.utf8)))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        try db.rekey(using: RawKeyProvider(key: Data(repeating: 6, count: 32)))
        db.close()
        let rekeyed = try opened(file, RawKeyProvider(key: Data(repeating: 6, count: 32)))
        XCTAssertEqual(rekeyed.int(forQuery: "SELECT count(*) FROM t"), 0)
        rekeyed.close()
    }
}

/// A raw key with its salt, as `x'<key><salt>'` gives it.
private struct SaltedRawKey: KeyProvider {
    let key: Data
    let salt: Data

    func key(for request: KeyRequest) throws -> DatabaseKey { try .raw(key, salt: salt) }
}
