@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Issue 13 §4: no path writes a new file (or re-keys one) with a KDF below the floor, unless spelled
/// `unsafe…`; an existing file with its own lower count still opens.
final class KDFFloorTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory("fmdb-kdf-floor")
    }

    override func tearDown() {
        directory = nil
    }

    /// A file written with 4,000 iterations, as SQLCipher 2 wrote them (through the unsafe spelling).
    func makeWeakFile(_ name: String = "weak.db", passphrase: String = "old") throws -> String {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider(passphrase), settings: CipherSettings(unsafeKDFIterations: 4_000))
        XCTAssertEqual(db.string(forQuery: "PRAGMA kdf_iter"), "4000")
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (1)"))
        db.close()
        return path
    }

    func testANewFileWithWeakKDFIterationsIsRefused() throws {
        let path = directory.path("new.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 1))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 63_999)))
        var mutated = CipherSettings()
        mutated.kdfIterations = 10
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("p"), settings: mutated), "setting the var does not bypass the floor")
        XCTAssertEqual(DatabaseFile.kind(atPath: path), .empty, "nothing was written")
        // At the floor and above, and with the unsafe spelling, it works.
        try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 64_000))
        db.close()
        XCTAssertNotNil(try makeWeakFile())
    }

    func testAnExistingFileWithItsOwnLowCountStillOpens() throws {
        let path = try makeWeakFile()
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("old"), settings: CipherSettings(kdfIterations: 4_000))
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t"), 1)
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (2)"))
        db.close()
    }

    func testAttachingANewFileWithWeakSettingsIsRefused() throws {
        let main = FMDatabase(path: directory.path("main.db"))
        XCTAssertTrue(main.open())
        XCTAssertTrue(main.executeUpdate("CREATE TABLE t (a)"))
        let copy = directory.path("copy.db")
        XCTAssertThrowsError(try main.attachDatabase(atPath: copy, schema: "copy", keyProvider: PassphraseKeyProvider("k"),
                                                     settings: CipherSettings(kdfIterations: 1_000))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertTrue(DatabaseFile.kind(atPath: copy).isNew, "nothing was written")
        try main.attachDatabase(atPath: copy, schema: "copy", keyProvider: PassphraseKeyProvider("k"),
                                settings: CipherSettings(unsafeKDFIterations: 1_000))
        try main.exportContents(to: "copy")
        try main.detachDatabase(schema: "copy")
        main.close()
        let check = FMDatabase(path: copy)
        XCTAssertTrue(check.open())
        try check.setKey(using: PassphraseKeyProvider("k"), settings: CipherSettings(kdfIterations: 1_000))
        XCTAssertEqual(check.string(forQuery: "PRAGMA kdf_iter"), "1000")
        check.close()
    }

    func testAPassphraseRekeyOfAWeakFileIsRefusedAndARawKeyRekeyIsNot() throws {
        let path = try makeWeakFile()
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("old"), settings: CipherSettings(kdfIterations: 4_000))
        XCTAssertFalse(db.rekey("new"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertThrowsError(try db.rekey(using: PassphraseKeyProvider("new"))) { XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE)) }
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t"), 1, "the connection still works with the old key")
        // A raw key has no KDF: allowed.
        let raw = try RawKeyProvider(key: Data(repeating: 0x5A, count: 32))
        try db.rekey(using: raw)
        db.close()
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        try check.setKey(using: raw)
        XCTAssertEqual(check.int(forQuery: "SELECT count(*) FROM t"), 1)
        check.close()
    }

    /// Security review: a passphrase shaped like `x'…'` is still a passphrase (SQLCipher runs its KDF on
    /// it), so it gets the floor; only SQLCipher's raw-key forms, `x'` + 64 or 96 hex digits + `'`, skip it.
    func testOnlyExactRawKeyLiteralsSkipTheRekeyFloor() throws {
        let hex64 = String(repeating: "5a", count: 32)
        let hex96 = String(repeating: "A5", count: 48)
        for (index, passphrase) in ["x'pass'", "x''", "X'41'", "x'\(hex64.dropLast())'", "x'\(hex64)0'", "x'\(hex64)0a'",
                           "x'\(hex96)00'", "x'\(hex64.dropLast())g'", "x'\(hex64)", "y'\(hex64)'", " x'\(hex64)'"].enumerated() {
            let path = try makeWeakFile("weak-\(index).db")
            let db = FMDatabase(path: path)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            try db.setKey(using: PassphraseKeyProvider("old"), settings: CipherSettings(kdfIterations: 4_000))
            XCTAssertThrowsError(try db.rekey(using: PassphraseKeyProvider(passphrase)), passphrase) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), passphrase)
            }
            XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t"), 1)
            db.close()
            XCTAssertFalse(SecureBytes(utf8: passphrase).isRawKeyLiteral, passphrase)
        }
        for literal in ["x'\(hex64)'", "X'\(hex64.uppercased())'", "x'\(hex96)'"] {
            XCTAssertTrue(SecureBytes(utf8: literal).isRawKeyLiteral, literal)
        }
        // Both raw forms pass the floor and rekey the file (96 digits: the key and the file's own salt).
        let path = try makeWeakFile("raw.db")
        let salt = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16)
        let withSalt = "x'\(hex64)\(salt.map { String(format: "%02x", $0) }.joined())'"
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("old"), settings: CipherSettings(kdfIterations: 4_000))
        try db.rekey(using: PassphraseKeyProvider("x'\(hex64)'"))
        try db.rekey(using: PassphraseKeyProvider(withSalt))
        db.close()
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        try check.setKey(using: RawKeyProvider(key: Data(repeating: 0x5A, count: 32)))
        XCTAssertEqual(check.int(forQuery: "SELECT count(*) FROM t"), 1)
        check.close()
    }

    func testWeakProvidersAreRefusedForKeyingAndRekeying() throws {
        let path = directory.path("p.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(try db.setKey(using: PBKDF2KeyProvider(passphrase: "p", iterations: 1_000))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertThrowsError(try db.setKey(using: ScryptKeyProvider(passphrase: "p", n: 1 << 10)))
        try db.setKey(using: PBKDF2KeyProvider(passphrase: "p", digest: .sha1, iterations: 64_000))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertThrowsError(try db.rekey(using: PBKDF2KeyProvider(passphrase: "q", iterations: 1_000))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertThrowsError(try db.rekey(using: ScryptKeyProvider(passphrase: "q", n: 1 << 10)))
        db.close()
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        XCTAssertNoThrow(try check.setKey(using: PBKDF2KeyProvider(passphrase: "p", digest: .sha1, iterations: 64_000)))
        check.close()
    }
}
