@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// SQLCipher on one connection: encryption at rest, keys, wrong keys, rekeys.
final class EncryptionTests: FMDBCipherTestCase {
    static let marker = "PLAINTEXT-MARKER-7f3a9c"

    /// A keyed database with rows that carry the marker.
    func makeEncryptedDatabase(_ name: String = "enc.db", key: String = "s3cret", journalMode: String = "delete") throws
        -> (FMDatabase, String)
    {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.setKey(key))
        XCTAssertEqual(db.string(forQuery: "pragma journal_mode=\(journalMode)"), journalMode)
        XCTAssertTrue(db.executeUpdate("create table secrets (id integer primary key, value text, blob blob)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<200 {
            XCTAssertTrue(
                db.executeUpdate(
                    "insert into secrets (value, blob) values (?, ?)", "\(Self.marker) row \(i)", Data(Self.marker.utf8)
                ))
        }
        XCTAssertTrue(db.commit())
        return (db, path)
    }

    func testFileHeaderIsNotPlaintext() throws {
        let (db, path) = try makeEncryptedDatabase()
        db.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertGreaterThan(bytes.count, 1024)
        XCTAssertNotEqual(bytes.prefix(16), Data("SQLite format 3\u{0}".utf8))
        XCTAssertFalse(bytes.contains(bytes: Self.marker))
        XCTAssertFalse(bytes.contains(bytes: "CREATE TABLE"))
        XCTAssertFalse(bytes.contains(bytes: "secrets"))
    }

    func testNoPlaintextInDatabaseWALOrJournalWhileOpen() throws {
        for mode in ["wal", "delete", "persist", "truncate"] {
            let (db, _) = try makeEncryptedDatabase("\(mode).db", journalMode: mode)
            // Leave a write transaction open so the journal / WAL holds fresh pages, then look at every file.
            XCTAssertTrue(db.beginTransaction())
            XCTAssertTrue(db.executeUpdate("update secrets set value = value || ?", " \(Self.marker) again"))
            XCTAssertTrue(db.executeUpdate("create temp table scratch as select * from secrets order by value desc"))
            let files = directory.allFileBytes()
            XCTAssertTrue(files.contains { $0.0.hasPrefix(mode + ".db") })
            for (name, bytes) in files {
                XCTAssertFalse(bytes.contains(bytes: Self.marker), "\(name) holds plaintext in \(mode) mode")
            }
            XCTAssertTrue(db.commit())
            for (name, bytes) in directory.allFileBytes() {
                XCTAssertFalse(
                    bytes.contains(bytes: Self.marker), "\(name) holds plaintext after commit in \(mode) mode")
            }
            XCTAssertEqual(db.int(forQuery: "select count(*) from secrets"), 200)
            db.close()
        }
    }

    func testKeyedConnectionKeepsTempStoreInMemory() throws {
        let (db, _) = try makeEncryptedDatabase()
        XCTAssertEqual(db.int(forQuery: "pragma temp_store"), 2)
        db.close()
    }

    func testVerifiedKeyedConnectionGetsTheLargerPageCacheAndCanOverrideIt() throws {
        let (legacy, path) = try makeEncryptedDatabase()
        XCTAssertEqual(legacy.int(forQuery: "pragma cache_size"), -2000, "FMDB's setKey(_:) keeps SQLite's default")
        legacy.close()

        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("s3cret"))
        XCTAssertEqual(FMDatabase.keyedConnectionCacheSizeKiB, 8192)
        XCTAssertEqual(db.int(forQuery: "pragma cache_size"), -8192)
        XCTAssertTrue(db.executeStatements("PRAGMA cache_size = -2000"))
        XCTAssertEqual(db.int(forQuery: "pragma cache_size"), -2000, "a PRAGMA after keying overrides the default")
        db.close()

        // A wrong key first, then the right one on the same connection: the default must not spoil the retry.
        let retry = FMDatabase(path: path)
        XCTAssertTrue(retry.open())
        XCTAssertThrowsError(try retry.setKey(using: PassphraseKeyProvider("wrong")))
        try retry.setKey(using: PassphraseKeyProvider("s3cret"))
        XCTAssertEqual(retry.int(forQuery: "pragma cache_size"), -8192)
        XCTAssertEqual(retry.int(forQuery: "select count(*) from secrets"), 200)
        retry.close()

        let queue = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("s3cret"))
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "pragma cache_size") }, -8192, "keyed queues too")
        queue.close()
    }

    func testWrongKeyFailsWithNotADatabase() throws {
        let (db, path) = try makeEncryptedDatabase()
        db.close()
        let wrong = FMDatabase(path: path)
        XCTAssertTrue(wrong.open())
        XCTAssertTrue(wrong.setKey("not the key"), "FMDB's setKey does not verify")
        XCTAssertNil(wrong.executeQuery("select * from secrets"))
        XCTAssertEqual(wrong.lastErrorCode(), SQLITE_NOTADB)
        XCTAssertFalse(wrong.goodConnection)
        wrong.close()

        let verified = FMDatabase(path: path)
        XCTAssertTrue(verified.open())
        XCTAssertThrowsError(try verified.setKey(using: PassphraseKeyProvider("not the key"))) { error in
            XCTAssertEqual(nsError(error).code, 26)
            XCTAssertEqual(nsError(error).domain, "FMDatabase")
            XCTAssertFalse(nsError(error).localizedDescription.contains("not the key"))
        }
        // After a wrong key the connection was reopened, so the right one can be tried.
        XCTAssertNoThrow(try verified.setKey(using: PassphraseKeyProvider("s3cret")))
        XCTAssertEqual(verified.int(forQuery: "select count(*) from secrets"), 200)
        verified.close()
    }

    func testNoKeyOnEncryptedFileAndKeyOnPlaintextFile() throws {
        let (db, path) = try makeEncryptedDatabase()
        db.close()
        let unkeyed = FMDatabase(path: path)
        XCTAssertTrue(unkeyed.open())
        XCTAssertNil(unkeyed.executeQuery("select * from secrets"))
        XCTAssertEqual(unkeyed.lastErrorCode(), SQLITE_NOTADB)
        unkeyed.close()

        let plainPath = directory.path("plain.db")
        let plain = FMDatabase(path: plainPath)
        XCTAssertTrue(plain.open())
        XCTAssertTrue(plain.executeUpdate("create table t (a)"))
        plain.close()
        let keyed = FMDatabase(path: plainPath)
        XCTAssertTrue(keyed.open())
        XCTAssertThrowsError(try keyed.setKey(using: PassphraseKeyProvider("key"))) { error in
            XCTAssertEqual(nsError(error).code, 26)
        }
        keyed.close()
        XCTAssertEqual(DatabaseFile.kind(atPath: plainPath), .plaintext, "the plaintext file is untouched")
    }

    func testEmptyKeyIsRefused() throws {
        let db = FMDatabase(path: directory.path("e.db"))
        XCTAssertTrue(db.open())
        XCTAssertFalse(db.setKey(""))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertFalse(db.setKeyWith(Data()))
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("")))
        db.close()
    }

    func testRekeyRoundTrip() throws {
        let (db, path) = try makeEncryptedDatabase(journalMode: "wal")
        XCTAssertTrue(db.rekey("new key"))
        XCTAssertEqual(db.int(forQuery: "select count(*) from secrets"), 200, "the connection goes on with the new key")
        XCTAssertTrue(db.executeUpdate("insert into secrets (value) values ('after rekey')"))
        db.close()

        for (key, works) in [("s3cret", false), ("new key", true)] {
            let check = FMDatabase(path: path)
            XCTAssertTrue(check.open())
            XCTAssertTrue(check.setKey(key))
            XCTAssertEqual(check.int(forQuery: "select count(*) from secrets"), works ? 201 : 0, key)
            XCTAssertEqual(check.hadError(), !works, key)
            check.close()
        }

        let again = FMDatabase(path: path)
        XCTAssertTrue(again.open())
        XCTAssertTrue(again.setKey("new key"))
        XCTAssertTrue(again.rekeyWith(Data("third".utf8)))
        again.close()
        let third = FMDatabase(path: path)
        XCTAssertTrue(third.open())
        XCTAssertNoThrow(try third.setKey(using: PassphraseKeyProvider("third")))
        XCTAssertNoThrow(try third.rekey(using: PassphraseKeyProvider("fourth")))
        third.close()
        let fourth = FMDatabase(path: path)
        XCTAssertTrue(fourth.open())
        XCTAssertNoThrow(try fourth.setKey(using: PassphraseKeyProvider("fourth")))
        XCTAssertEqual(fourth.int(forQuery: "select count(*) from secrets"), 201)
        XCTAssertEqual(fourth.string(forQuery: "pragma integrity_check"), "ok")
        fourth.close()
    }

    // MARK: - Key-safety rules (<doc:KeysAndKeyProviders>)

    func testKeyingAgainWithTheSameKeyIsANoOp() throws {
        let (db, _) = try makeEncryptedDatabase()
        XCTAssertTrue(db.setKey("s3cret"))
        XCTAssertTrue(db.setKeyWith(Data("s3cret".utf8)))
        XCTAssertEqual(db.int(forQuery: "select count(*) from secrets"), 200)
        db.close()
    }

    func testKeyingAUsedConnectionWithAnotherKeyIsRefused() throws {
        let (db, path) = try makeEncryptedDatabase()
        XCTAssertFalse(db.setKey("other"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertTrue(db.executeUpdate("insert into secrets (value) values ('still fine')"))
        db.close()
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        XCTAssertTrue(check.setKey("s3cret"))
        XCTAssertEqual(check.int(forQuery: "select count(*) from secrets"), 201)
        XCTAssertEqual(check.string(forQuery: "pragma integrity_check"), "ok")
        check.close()
    }

    func testKeyingAConnectionThatReadUnkeyedIsRefused() throws {
        let plainPath = directory.path("plain.db")
        let db = FMDatabase(path: plainPath)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
        XCTAssertFalse(db.setKey("late key"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertTrue(db.executeUpdate("insert into t values (2)"))
        db.close()
        XCTAssertEqual(DatabaseFile.kind(atPath: plainPath), .plaintext)
    }

    func testKeyBeforeFirstStatementAfterCipherPragmasIsAllowed() throws {
        let db = FMDatabase(path: directory.path("p.db"))
        XCTAssertTrue(db.open())
        // Reading a cipher pragma before the key is a statement that touches no page (setting the
        // process-wide cipher_default_* ones is refused: KeyedAuthorizerTests).
        let expected = SQLCipherRuntime.majorVersion >= 4 ? "256000" : "64000"
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_default_kdf_iter"), expected)
        XCTAssertTrue(db.setKey("k"))
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        db.close()
    }

    func testRekeyInsideATransactionOrSavepointIsRefused() throws {
        let (db, path) = try makeEncryptedDatabase()
        XCTAssertTrue(db.beginTransaction())
        XCTAssertFalse(db.rekey("new"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertTrue(db.commit())
        try db.startSavePoint(withName: "sp")
        XCTAssertThrowsError(try db.rekey(using: PassphraseKeyProvider("new"))) { XCTAssertEqual(nsError($0).code, 21) }
        try db.releaseSavePoint(withName: "sp")
        db.close()
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        XCTAssertNoThrow(try check.setKey(using: PassphraseKeyProvider("s3cret")))
        check.close()
    }

    func testRekeyWithOpenResultSetsIsRefused() throws {
        let (db, _) = try makeEncryptedDatabase()
        let rs = db.executeQuery("select * from secrets")
        XCTAssertTrue(rs?.next() ?? false)
        XCTAssertFalse(db.rekey("new"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        rs?.close()
        XCTAssertTrue(db.rekey("new"))
        db.close()
    }

    func testRekeyOfAPlaintextDatabaseIsRefused() throws {
        let path = directory.path("plain.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertFalse(db.rekey("k"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertTrue(db.lastErrorMessage().contains("not encrypted"))
        db.close()
        XCTAssertEqual(DatabaseFile.kind(atPath: path), .plaintext)
    }

    func testRekeyUnderAnotherConnectionsLockFailsWithBusyAndKeepsOldKey() throws {
        for mode in ["delete", "wal"] {
            let (db, path) = try makeEncryptedDatabase("\(mode).db", journalMode: mode)
            db.maxBusyRetryTimeInterval = 0.1
            let other = FMDatabase(path: path)
            XCTAssertTrue(other.open())
            XCTAssertTrue(other.setKey("s3cret"))
            XCTAssertTrue(other.beginImmediateTransaction(), "the other connection holds the write lock")
            XCTAssertTrue(other.executeUpdate("insert into secrets (value) values ('other')"))

            XCTAssertFalse(db.rekey("new key"), mode)
            XCTAssertEqual(db.lastErrorCode(), SQLITE_BUSY, mode)
            XCTAssertTrue(other.commit())
            other.close()

            // The connection goes on under the old key, and what it writes stays readable with it.
            XCTAssertTrue(db.executeUpdate("insert into secrets (value) values ('after failed rekey')"), mode)
            XCTAssertEqual(db.int(forQuery: "select count(*) from secrets"), 202, mode)
            db.close()
            let check = FMDatabase(path: path)
            XCTAssertTrue(check.open())
            XCTAssertNoThrow(try check.setKey(using: PassphraseKeyProvider("s3cret")), mode)
            XCTAssertEqual(check.int(forQuery: "select count(*) from secrets"), 202, mode)
            XCTAssertEqual(check.string(forQuery: "pragma integrity_check"), "ok", mode)
            check.close()
        }
    }

    func testRekeyUnderAnotherConnectionsReadLockFailsCleanly() throws {
        let (db, path) = try makeEncryptedDatabase("read.db", journalMode: "delete")
        db.maxBusyRetryTimeInterval = 0.1
        let reader = FMDatabase(path: path)
        XCTAssertTrue(reader.open())
        XCTAssertTrue(reader.setKey("s3cret"))
        let rs = reader.executeQuery("select * from secrets")
        XCTAssertTrue(rs?.next() ?? false, "the reader holds a SHARED lock")
        XCTAssertFalse(db.rekey("new key"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_BUSY)
        rs?.close()
        reader.close()
        XCTAssertTrue(db.executeUpdate("insert into secrets (value) values ('after')"))
        db.close()
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        XCTAssertNoThrow(try check.setKey(using: PassphraseKeyProvider("s3cret")))
        XCTAssertEqual(check.int(forQuery: "select count(*) from secrets"), 201)
        XCTAssertEqual(check.string(forQuery: "pragma integrity_check"), "ok")
        check.close()
    }

    // MARK: - Secrets stay secret

    func testKeysNeverReachTraceOrErrorLogs() throws {
        let capture = LogCapture()
        let path = directory.path("trace.db")
        let db = FMDatabase(path: path)
        db.logger = capture.logger()
        db.traceExecution = true
        db.logsErrors = true
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.setKey("TOPSECRETKEY1"))
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertTrue(db.rekey("TOPSECRETKEY2"))
        XCTAssertFalse(db.setKey("TOPSECRETKEY3"))
        db.executeUpdate("select nonsense")
        db.close()
        let reopened = FMDatabase(path: path)
        reopened.logger = capture.logger()
        reopened.traceExecution = true
        XCTAssertTrue(reopened.open())
        XCTAssertThrowsError(try reopened.setKey(using: PassphraseKeyProvider("TOPSECRETKEY4")))
        reopened.close()
        let lines = capture.all
        XCTAssertTrue(lines.contains { $0.contains("create table t") }, "tracing works")
        XCTAssertTrue(lines.contains { $0.contains("DB Error") }, "error logging works")
        for line in lines {
            XCTAssertFalse(line.contains("TOPSECRETKEY"), line)
        }
    }

    func testKeyDescriptionsAreRedacted() throws {
        let key = DatabaseKey.passphrase("hunter2-secret")
        XCTAssertFalse("\(key)".contains("hunter2"))
        XCTAssertFalse(String(reflecting: key).contains("hunter2"))
        let raw = try DatabaseKey.raw(Data(repeating: 0xAB, count: 32))
        XCTAssertFalse("\(raw)".lowercased().contains("abab"))
        XCTAssertThrowsError(try DatabaseKey.raw(Data(repeating: 0xAB, count: 31))) { error in
            XCTAssertFalse("\(error)".lowercased().contains("abab"))
            XCTAssertEqual(nsError(error).code, 21)
        }
    }

    func testKeyBytesAreWipedWhenReleased() throws {
        let wiped = LogCapture()
        SecureBytes.setWipeObserver { buffer in
            wiped.append(buffer.allSatisfy { $0 == 0 } ? "zero:\(buffer.count)" : "DIRTY:\(buffer.count)")
        }
        defer { SecureBytes.setWipeObserver(nil) }
        do {
            let db = FMDatabase(path: directory.path("wipe.db"))
            XCTAssertTrue(db.open())
            XCTAssertTrue(db.setKey("wipe-me-key-0123456789"))
            XCTAssertTrue(db.executeUpdate("create table t (a)"))
            let raw = try DatabaseKey.raw(Data(repeating: 7, count: 32), salt: Data(repeating: 1, count: 16))
            let hex = raw.sqlcipherKeyBytes()
            XCTAssertEqual(hex.count, 3 + 96)
            db.close()
        }
        let events = wiped.all
        XCTAssertTrue(events.contains("zero:22"), "the passphrase buffer was wiped: \(events)")
        XCTAssertTrue(events.contains("zero:99"), "the x'...' hex buffer was wiped: \(events)")
        XCTAssertTrue(events.contains("zero:32"), "the raw key was wiped: \(events)")
        XCTAssertFalse(events.contains { $0.hasPrefix("DIRTY") })
    }

    func testCipherFacts() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        // Facts that follow from the running SQLCipher's version (PRAGMA cipher_version), whichever it is:
        // SQLCipher 3 writes its own format only; SQLCipher 4 writes 4's and reads and writes 3's too.
        let version = try XCTUnwrap(db.cipherVersion)
        let major = try XCTUnwrap(Int(version.prefix { $0 != "." }), version)
        XCTAssertTrue(major == 3 || major == 4, "SQLCipher \(version): the library knows formats 3 and 4")
        XCTAssertEqual(SQLCipherRuntime.majorVersion, major)
        XCTAssertTrue(FMDatabase.sqliteLibVersion().hasPrefix("3."), FMDatabase.sqliteLibVersion())
        if major == 3 {
            XCTAssertEqual(CipherFormat.linkedDefault, .v3)
            XCTAssertFalse(CipherFormat.v4.isSupportedByLinkedSQLCipher)
        } else {
            XCTAssertEqual(CipherFormat.linkedDefault, .v4)
            XCTAssertTrue(CipherFormat.allCases.allSatisfy(\.isSupportedByLinkedSQLCipher))
        }
        // The library registers its own provider on the versions whose provider interface it verified
        // (CryptoProviderTests); on any other, SQLCipher's own runs.
        let ours =
            FMDatabase.cryptoProvider == .library && CryptoProviderRegistration.layout(forCipherVersion: version) != nil
        XCTAssertEqual(db.cipherProvider, ours ? "fmdbcipher-openssl" : "openssl")
        XCTAssertNotNil(db.cipherProviderVersion)
        XCTAssertNotNil(db.cipherFipsStatus)
        db.close()
        XCTAssertNil(db.cipherVersion)
    }

    func testSqliteHandleGivesTheCAPI() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        let handle = try XCTUnwrap(db.sqliteHandle)
        XCTAssertEqual(sqlite3_exec(OpaquePointer(handle), "create table c (a)", nil, nil, nil), SQLITE_OK)
        XCTAssertTrue(db.tableExists("c"))
        db.close()
    }
}
