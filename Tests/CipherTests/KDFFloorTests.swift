@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// No path writes a new file (or re-keys one) with a KDF below the floor, unless spelled
/// `unsafe…`; an existing file with its own lower count still opens.
final class KDFFloorTests: FMDBCipherTestCase {
    /// A file written with 4,000 iterations, as SQLCipher 2 wrote them (through the unsafe spelling).
    func makeWeakFile(_ name: String = "weak.db", passphrase: String = "old") throws -> String {
        try makeKeyedDatabase(
            name, provider: PassphraseKeyProvider(passphrase), settings: CipherSettings(unsafeKDFIterations: 4_000)
        ) { db in
            XCTAssertEqual(db.string(forQuery: "PRAGMA kdf_iter"), "4000")
            XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
            XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (1)"))
        }
    }

    func testANewFileWithWeakKDFIterationsIsRefused() throws {
        let path = directory.path("new.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(
            try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 1))
        ) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertThrowsError(
            try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 63_999)))
        var mutated = CipherSettings()
        mutated.kdfIterations = 10
        XCTAssertThrowsError(
            try db.setKey(using: PassphraseKeyProvider("p"), settings: mutated),
            "setting the var does not bypass the floor")
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
        XCTAssertThrowsError(
            try main.attachDatabase(
                atPath: copy, schema: "copy", keyProvider: PassphraseKeyProvider("k"),
                settings: CipherSettings(kdfIterations: 1_000))
        ) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
        XCTAssertTrue(DatabaseFile.kind(atPath: copy).isNew, "nothing was written")
        try main.attachDatabase(
            atPath: copy, schema: "copy", keyProvider: PassphraseKeyProvider("k"),
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
        XCTAssertThrowsError(try db.rekey(using: PassphraseKeyProvider("new"))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE))
        }
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
        for (index, passphrase) in [
            "x'pass'", "x''", "X'41'", "x'\(hex64.dropLast())'", "x'\(hex64)0'", "x'\(hex64)0a'",
            "x'\(hex96)00'", "x'\(hex64.dropLast())g'", "x'\(hex64)", "y'\(hex64)'", " x'\(hex64)'",
        ].enumerated() {
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

    // MARK: - Numbers reach SQLCipher as given

    /// Counts SQLCipher's `atoi` would read as another number (2^32 + 1 as 1, 2^31 as a negative count),
    /// and counts that are not positive: refused with SQLITE_MISUSE before anything is keyed or written,
    /// through every spelling and every way in (setKey, attachDatabase, PBKDF2KeyProvider).
    func testKDFIterationCountsOutsideACIntAreRefused() throws {
        let path = directory.path("new.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        let raw = try RawKeyProvider(key: Data(repeating: 0x42, count: 32))
        for count in [2_147_483_648, 4_294_967_297, Int.max, 0, -1, -64_000, Int.min] {
            var mutated = CipherSettings()
            mutated.kdfIterations = count
            for settings in [CipherSettings(kdfIterations: count), CipherSettings(unsafeKDFIterations: count), mutated]
            {
                XCTAssertThrowsError(try db.setKey(using: raw, settings: settings), "\(count)") {
                    XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), "\(count)")
                    XCTAssertTrue(
                        nsError($0).localizedDescription.contains("2147483647"), nsError($0).localizedDescription)
                }
                XCTAssertThrowsError(try settings.validate(), "\(count)")
                XCTAssertThrowsError(
                    try db.attachDatabase(
                        atPath: directory.path("copy.db"), schema: "copy", keyProvider: raw,
                        settings: settings), "\(count)"
                ) {
                    XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), "\(count)")
                }
            }
        }
        XCTAssertEqual(DatabaseFile.kind(atPath: path), .empty, "nothing was written")
        XCTAssertTrue(DatabaseFile.kind(atPath: directory.path("copy.db")).isNew, "nothing was attached and written")
    }

    /// OpenSSL's PBKDF2 takes the count as a C int too: a larger count is refused, not clamped to
    /// 2,147,483,647 (a derivation of hours, under a count nobody asked for).
    func testPBKDF2IterationCountsOutsideACIntAreRefused() throws {
        let request = KeyRequest(databasePath: directory.path("p.db"), salt: Data(repeating: 1, count: 16))
        for count in [2_147_483_648, 4_294_967_297, Int.max, 0, -1, Int.min] {
            XCTAssertThrowsError(
                try PBKDF2KeyProvider(passphrase: "p", iterations: count).key(for: request), "\(count)"
            ) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), "\(count)")
            }
            XCTAssertThrowsError(
                try PBKDF2KeyProvider(passphrase: "p", unsafeIterations: count).key(for: request), "\(count)")
        }
    }

    /// Page sizes SQLCipher would refuse or read as another number (2^32 + 512 is 512 to `atoi`).
    func testCipherPageSizesOutsideTheRangeAreRefused() throws {
        let db = FMDatabase(path: directory.path("new.db"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        let raw = try RawKeyProvider(key: Data(repeating: 0x42, count: 32))
        for size in [0, -512, 256, 1000, 131_072, 4_294_967_296 + 512, 1 << 40, Int.min] {
            XCTAssertThrowsError(try db.setKey(using: raw, settings: CipherSettings(pageSize: size)), "\(size)") {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE), "\(size)")
            }
        }
    }

    /// The largest and smallest accepted numbers reach SQLCipher as those numbers: read back with PRAGMA
    /// kdf_iter / cipher_page_size on the keyed connection, and (the largest) the file opens again with
    /// them. (A raw key runs no KDF, so 2,147,483,647 iterations cost nothing.)
    func testBoundaryValuesReachSQLCipherAsGiven() throws {
        let raw = try RawKeyProvider(key: Data(repeating: 0x42, count: 32))
        let path = directory.path("max.db")
        let largest = CipherSettings(pageSize: 65_536, kdfIterations: Int(Int32.max))
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: raw, settings: largest)
        XCTAssertEqual(db.string(forQuery: "PRAGMA kdf_iter"), "2147483647")
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_page_size"), "65536")
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"), db.lastErrorMessage())
        db.close()
        let again = FMDatabase(path: path)
        XCTAssertTrue(again.open())
        try again.setKey(using: raw, settings: largest)
        XCTAssertEqual(again.string(forQuery: "PRAGMA kdf_iter"), "2147483647")
        XCTAssertEqual(again.string(forQuery: "PRAGMA cipher_page_size"), "65536")
        XCTAssertEqual(again.int(forQuery: "SELECT count(*) FROM sqlite_master"), 1)
        again.close()
        // The smallest: read back only (512-byte pages leave SQLite too little room beside SQLCipher's
        // per-page IV and HMAC for a table to be written).
        let small = FMDatabase(path: directory.path("min.db"))
        XCTAssertTrue(small.open())
        try small.setKey(using: raw, settings: CipherSettings(pageSize: 512, unsafeKDFIterations: 1))
        XCTAssertEqual(small.string(forQuery: "PRAGMA kdf_iter"), "1")
        XCTAssertEqual(small.string(forQuery: "PRAGMA cipher_page_size"), "512")
        small.close()
        // Attached with the boundary settings: the schema's own PRAGMAs say the same.
        let main = FMDatabase(path: directory.path("main.db"))
        XCTAssertTrue(main.open())
        try main.attachDatabase(
            atPath: directory.path("attached.db"), schema: "copy", keyProvider: raw,
            settings: CipherSettings(pageSize: 65_536, kdfIterations: Int(Int32.max)))
        XCTAssertEqual(main.string(forQuery: "PRAGMA copy.kdf_iter"), "2147483647")
        XCTAssertEqual(main.string(forQuery: "PRAGMA copy.cipher_page_size"), "65536")
        main.close()
    }
}
