import FMDB
import Foundation
import TestSupport
import XCTest

/// A key provider carries the cipher settings its file needs (`KeyProvider.cipherSettings`), so a queue or a
/// pool keys every connection it opens with them, and a rekey through either keeps them: a file without an
/// HMAC, or with a plaintext header (an iOS shared-container file), is served like any other.
final class KeyProviderCipherSettingsTests: FMDBCipherTestCase {
    let noHMAC = CipherSettings(usesHMAC: false)
    let salt = Data((0..<16).map { UInt8(0x40 + $0) })
    var plaintextHeader: CipherSettings { CipherSettings(plaintextHeaderSize: 32, salt: salt) }

    /// Writes a file with one row (7) by a plain `FMDatabase`, keyed with `settings` given explicitly.
    func write(_ file: String, _ provider: any KeyProvider, _ settings: CipherSettings) throws {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        try db.setKey(using: provider, settings: settings)
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (7)"))
        db.close()
    }

    /// The row count of `file` opened by a plain `FMDatabase` with `settings` given explicitly.
    func rows(_ file: String, _ provider: any KeyProvider, _ settings: CipherSettings) throws -> Int32 {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: provider, settings: settings)
        return db.int(forQuery: "SELECT count(*) FROM t")
    }

    func requirePlaintextHeaders() throws {
        let probe = FMDatabase(path: nil)
        XCTAssertTrue(probe.open())
        defer { probe.close() }
        try probe.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        guard probe.string(forQuery: "PRAGMA cipher_plaintext_header_size") != nil else {
            throw XCTSkip("the running SQLCipher (\(probe.cipherVersion ?? "?")) has no plaintext headers")
        }
    }

    func testSettingsGivenToACallWinOverTheProvidersSettingBySetting() {
        let given = CipherSettings(pageSize: 8192, usesHMAC: true)
        let filled = given.filling(from: CipherSettings(pageSize: 1024, kdfIterations: 100_000, usesHMAC: false))
        XCTAssertEqual(filled.pageSize, 8192)
        XCTAssertEqual(filled.usesHMAC, true)
        XCTAssertEqual(filled.kdfIterations, 100_000)
        XCTAssertEqual(given.filling(from: nil), given)
        let weak = CipherSettings(unsafeKDFIterations: 2)
        XCTAssertEqual(CipherSettings().filling(from: weak), weak, "the unsafe spelling comes with its count")
        XCTAssertNil(PassphraseKeyProvider("p").cipherSettings)
        XCTAssertEqual(PassphraseKeyProvider("p").withCipherSettings(noHMAC).cipherSettings, noHMAC)
    }

    func testAQueueKeysItsConnectionWithTheProvidersSettings() throws {
        let file = path("no-hmac-queue.db")
        try write(file, PassphraseKeyProvider("p"), noHMAC)
        let queue = try FMDatabaseQueue(path: file, keyProvider: PassphraseKeyProvider("p").withCipherSettings(noHMAC))
        try queue.inDatabase { db throws in
            XCTAssertEqual(db.int(forQuery: "SELECT a FROM t"), 7)
            XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (8)"))
        }
        try queue.rekey(using: PassphraseKeyProvider("q"))
        queue.close()
        try queue.inDatabase { db throws in XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (9)")) }
        queue.close()
        XCTAssertEqual(try rows(file, PassphraseKeyProvider("q"), noHMAC), 3, "still without an HMAC, new key")
    }

    /// A rekey changes the key only: a new provider carrying settings other than the file's is refused before
    /// anything changes (they would not be applied, and the queue or pool would then key with settings the
    /// file does not have); one carrying the file's own settings, or none, rekeys and keeps them.
    func testARekeyToAProviderWithOtherSettingsIsRefusedAndWithTheSameOnesWorks() throws {
        let file = path("no-hmac-partial.db")
        try write(file, PassphraseKeyProvider("p"), noHMAC)
        let queue = try FMDatabaseQueue(path: file, keyProvider: PassphraseKeyProvider("p").withCipherSettings(noHMAC))
        let pool = try FMDatabasePool(path: file, keyProvider: PassphraseKeyProvider("p").withCipherSettings(noHMAC))
        let other = PassphraseKeyProvider("q").withCipherSettings(CipherSettings(kdfIterations: 64_000))
        XCTAssertThrowsError(try queue.rekey(using: other)) { XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE)) }
        XCTAssertThrowsError(try pool.rekey(using: other)) { XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE)) }
        XCTAssertEqual(try rows(file, PassphraseKeyProvider("p"), noHMAC), 1, "nothing changed")
        pool.releaseAllDatabases()
        try queue.rekey(using: PassphraseKeyProvider("q").withCipherSettings(noHMAC))
        try queue.inDatabase { db throws in XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (9)")) }
        queue.close()
        XCTAssertEqual(try rows(file, PassphraseKeyProvider("q"), noHMAC), 2)
    }

    /// Whether a weak count was spelled `unsafe…` is not a setting of the file: a rekey whose new provider
    /// gives the same count plainly is not refused.
    func testARekeyWithTheSameCountSpelledPlainlyIsNotRefused() throws {
        let file = path("weak-count.db")
        let old = try RawKeyProvider(key: Data(repeating: 3, count: 32))
        let weak = CipherSettings(unsafeKDFIterations: 12_000)
        try write(file, old, weak)
        let queue = try FMDatabaseQueue(path: file, keyProvider: old.withCipherSettings(weak))
        let new = try RawKeyProvider(key: Data(repeating: 4, count: 32))
        XCTAssertEqual(try queue.rekey(using: new.withCipherSettings(CipherSettings(kdfIterations: 12_000))), .done)
        queue.close()
        XCTAssertEqual(try rows(file, new, weak), 1)
    }

    /// Settings given again add to a provider's own, in one wrapper; what kind of provider hands out the keys
    /// stays visible under it.
    func testSettingsGivenAgainAddToTheProvidersAndTheKindOfProviderShows() throws {
        let base = PassphraseKeyProvider("p")
        let twice = base.withCipherSettings(noHMAC).withCipherSettings(CipherSettings(pageSize: 8192))
        XCTAssertEqual(twice.settings, CipherSettings(pageSize: 8192, usesHMAC: false))
        XCTAssertTrue(twice.base is PassphraseKeyProvider, "one wrapper, not a stack: \(type(of: twice.base))")
        let slots = KeySlotKeyProvider(secret: .passphrase("a long passphrase"))
        XCTAssertTrue(slots.withCipherSettings(noHMAC).withCipherSettings(noHMAC).base is KeySlotKeyProvider)
    }

    func testAPoolKeysEveryConnectionWithTheProvidersSettingsAndItsRekeyKeepsThem() throws {
        let file = path("no-hmac-pool.db")
        try write(file, PassphraseKeyProvider("p"), noHMAC)
        let pool = try FMDatabasePool(path: file, keyProvider: PassphraseKeyProvider("p").withCipherSettings(noHMAC))
        try exercise(pool, newKey: PassphraseKeyProvider("q"))
        XCTAssertEqual(try rows(file, PassphraseKeyProvider("q"), noHMAC), 3, "still without an HMAC, new key")
    }

    func testAPlaintextHeaderFileThroughAQueueAndAPool() throws {
        try requirePlaintextHeaders()
        let file = path("header.db")
        let key = Data(repeating: 0x2A, count: 32)
        try write(file, RawKeyProvider(key: key), plaintextHeader)
        let provider = try RawKeyProvider(key: key).withCipherSettings(plaintextHeader)
        let queue = try FMDatabaseQueue(path: file, keyProvider: provider)
        try queue.inDatabase { db throws in XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (8)")) }
        queue.close()
        let pool = try FMDatabasePool(path: file, keyProvider: provider)
        let newKey = Data(repeating: 0x2B, count: 32)
        try exercise(pool, newKey: RawKeyProvider(key: newKey), expectedBefore: 2)
        XCTAssertEqual(try rows(file, RawKeyProvider(key: newKey), plaintextHeader), 4)
        let header = try XCTUnwrap(FileManager.default.contents(atPath: file)).prefix(16)
        XCTAssertEqual(Data(header), Data("SQLite format 3\0".utf8), "the rekey kept the plaintext header")
    }

    /// Reads and writes on two connections at once, rekeys to `newKey` (a provider without settings), then
    /// reads and writes on connections opened after the rekey.
    func exercise(_ pool: FMDatabasePool, newKey: any KeyProvider, expectedBefore: Int32 = 1) throws {
        try pool.inDatabase { first throws in
            XCTAssertEqual(first.int(forQuery: "SELECT count(*) FROM t"), expectedBefore)
            try pool.inDatabase { second throws in
                XCTAssertTrue(second.executeUpdate("INSERT INTO t VALUES (8)"))
            }
        }
        try pool.rekey(using: newKey)
        pool.releaseAllDatabases()
        try pool.inDatabase { db throws in
            XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (9)"))
            XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t"), expectedBefore + 2)
        }
        pool.releaseAllDatabases()
    }
}

/// A copy keeps or drops a plaintext header only when asked: by default it keeps SRC's size and salt.
final class PlaintextHeaderCopyTests: FMDBCipherTestCase {
    let salt = Data((0..<16).map { UInt8(0x60 + $0) })
    var header: CipherSettings { CipherSettings(plaintextHeaderSize: 32, salt: salt) }

    func copy(destinationSettings: CipherSettings, provider: any KeyProvider) throws -> FMDatabaseCopy {
        FMDatabaseCopy(
            from: path("src.db"), keyProvider: try RawKeyProvider(key: Data(repeating: 1, count: 32)),
            settings: header, to: path("dest.db"), destinationKeyProvider: provider,
            destinationSettings: destinationSettings)
    }

    func testTheCopysSettingsKeepSRCsHeaderUnlessAsked() throws {
        let newKey = try RawKeyProvider(key: Data(repeating: 2, count: 32))
        let kept = try copy(destinationSettings: CipherSettings(pageSize: 8192), provider: newKey).writtenSettings
        XCTAssertEqual(kept.plaintextHeaderSize, 32)
        XCTAssertEqual(kept.salt, salt)
        XCTAssertEqual(kept.pageSize, 8192)
        let dropped = try copy(destinationSettings: CipherSettings(plaintextHeaderSize: 0), provider: newKey)
        XCTAssertEqual(dropped.writtenSettings.plaintextHeaderSize, 0)
        XCTAssertNil(dropped.writtenSettings.salt, "a file without a header holds a new salt of its own")
        let other = Data(repeating: 9, count: 16)
        let resized = try copy(
            destinationSettings: CipherSettings(plaintextHeaderSize: 64, salt: other), provider: newKey)
        XCTAssertEqual(resized.writtenSettings, CipherSettings(plaintextHeaderSize: 64, salt: other))
        let viaProvider = try copy(
            destinationSettings: CipherSettings(),
            provider: newKey.withCipherSettings(CipherSettings(plaintextHeaderSize: 0)))
        XCTAssertEqual(viaProvider.writtenSettings.plaintextHeaderSize, 0, "the destination provider's settings count")
        // The same provider (and header settings) on both sides, the header dropped: a fresh salt, never SRC's
        // (under the same key it would give the copy SRC's page keys).
        let same = try RawKeyProvider(key: Data(repeating: 1, count: 32)).withCipherSettings(header)
        let fresh = try copy(destinationSettings: CipherSettings(plaintextHeaderSize: 0), provider: same)
        XCTAssertEqual(fresh.writtenSettings.plaintextHeaderSize, 0)
        XCTAssertNil(fresh.writtenSettings.salt, "no header: a salt of its own")
        // SQLCipher 3's format has no plaintext header: a copy in it keeps none of SRC's.
        let v3 = try copy(destinationSettings: CipherSettings(format: .v3), provider: newKey)
        XCTAssertNil(v3.writtenSettings.plaintextHeaderSize)
        XCTAssertNil(v3.writtenSettings.salt)
    }

    func testACopyOfAHeaderFileKeepsItAndDropsItWhenAsked() throws {
        let probe = FMDatabase(path: nil)
        XCTAssertTrue(probe.open())
        try probe.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        let hasHeaders = probe.string(forQuery: "PRAGMA cipher_plaintext_header_size") != nil
        probe.close()
        guard hasHeaders else { throw XCTSkip("the running SQLCipher has no plaintext headers") }
        let db = FMDatabase(path: path("src.db"))
        XCTAssertTrue(db.open())
        try db.setKey(using: RawKeyProvider(key: Data(repeating: 1, count: 32)), settings: header)
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        db.close()
        let newKey = try RawKeyProvider(key: Data(repeating: 2, count: 32))
        try copy(destinationSettings: CipherSettings(), provider: newKey).run()
        XCTAssertEqual(FMDatabase.inspectFile(atPath: path("dest.db")), .encryptedWithPlaintextHeader(size: 32))
        let reopened = FMDatabase(path: path("dest.db"))
        XCTAssertTrue(reopened.open())
        try reopened.setKey(using: newKey, settings: header)
        reopened.close()
        try FileManager.default.removeItem(atPath: path("dest.db"))
        try copy(destinationSettings: CipherSettings(plaintextHeaderSize: 0), provider: newKey).run()
        guard case .encrypted = FMDatabase.inspectFile(atPath: path("dest.db")) else {
            return XCTFail("asked to drop the header: \(FMDatabase.inspectFile(atPath: path("dest.db")))")
        }
    }
}
