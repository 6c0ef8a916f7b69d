@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// SQLCipher file formats on whichever SQLCipher line the suite is linked with (Scripts/test runs it on
/// 3.4.1 and on 4.6.1): new files in the linked default format, older formats found without settings,
/// the cost of finding them, and, on 3.x, a SQLCipher 4 file with the right key told apart from a wrong key.
/// Files of the other line come from its shell (FMDB_SQLCIPHER3_SHELL / FMDB_SQLCIPHER4_SHELL, set by
/// Scripts/test); those tests skip, saying so, when it is not set.
final class CipherFormatTests: FMDBCipherTestCase {
    /// The format just below the linked default: v3 on 4.x, v2 on 3.x.
    var olderFormat: CipherFormat { CipherFormat(rawValue: CipherFormat.linkedDefault.rawValue - 1) ?? .v1 }

    func makeDatabase(_ name: String, provider: any KeyProvider, settings: CipherSettings = CipherSettings()) throws
        -> String
    {
        try makeKeyedDatabase(name, provider: provider, settings: settings) { db in
            try db.executeUpdate("create table t (a text)", values: nil)
            try db.executeUpdate(
                "insert into t values (?)", values: ["in \(settings.format?.description ?? "default")"])
        }
    }

    /// Opens `path` with `provider` and no settings; returns the format and the row, or throws.
    func open(_ path: String, _ provider: any KeyProvider, settings: CipherSettings = CipherSettings()) throws -> (
        CipherFormat?, String?
    ) {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: provider, settings: settings)
        return (db.cipherFormat, db.string(forQuery: "select a from t"))
    }

    func shell(_ variable: String) throws -> String {
        guard let path = ProcessInfo.processInfo.environment[variable],
            FileManager.default.isExecutableFile(atPath: path)
        else {
            throw XCTSkip("\(variable) is not set to a sqlcipher shell (Scripts/test sets it)")
        }
        return path
    }

    func testNewDatabaseIsWrittenInTheLinkedDefaultFormat() throws {
        let path = try makeDatabase("new.db", provider: PassphraseKeyProvider("p"))
        let (format, row) = try open(path, PassphraseKeyProvider("p"))
        XCTAssertEqual(format, CipherFormat.linkedDefault)
        XCTAssertEqual(row, "in default")
        let pageSize = CipherFormat.linkedDefault == .v4 ? 4096 : 1024
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)).count % pageSize, 0)
        // Unkeyed and plaintext connections have no format.
        let plain = FMDatabase()
        XCTAssertTrue(plain.open())
        XCTAssertNil(plain.cipherFormat)
    }

    func testOlderFormatsOpenWithTheSameProviderAndNoSettings() throws {
        for format in CipherFormat.allCases where format.isSupportedByLinkedSQLCipher {
            for (label, provider) in [
                ("passphrase", PassphraseKeyProvider("old secret") as any KeyProvider),
                ("compatible", PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "old secret")),
                ("raw", try RawKeyProvider(key: Data(repeating: 7, count: 32))),
            ] {
                let path = try makeDatabase(
                    "\(label)-\(format.rawValue).db", provider: provider, settings: CipherSettings(format: format))
                let (found, row) = try open(path, provider)
                // On a raw key SQLCipher 2 and 3 files are the same bytes: either answer is right.
                if label == "raw", format == .v2 {
                    XCTAssertTrue(found == .v2 || found == .v3, "\(label) \(format): \(String(describing: found))")
                } else {
                    XCTAssertEqual(found, format, label)
                }
                XCTAssertEqual(row, "in \(format)", "\(label) \(format)")
            }
        }
    }

    func testAnExplicitFormatIsUsedAsGivenAndAWrongKeyIsStillCode26() throws {
        let path = try makeDatabase("default.db", provider: PassphraseKeyProvider("p"))
        XCTAssertThrowsError(try open(path, PassphraseKeyProvider("p"), settings: CipherSettings(format: olderFormat)))
        { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_NOTADB))
        }
        XCTAssertThrowsError(try open(path, PassphraseKeyProvider("wrong"))) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_NOTADB))
        }
        // After a wrong key the connection is usable for another try.
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("wrong")))
        XCTAssertNoThrow(try db.setKey(using: PassphraseKeyProvider("p")))
        XCTAssertEqual(db.cipherFormat, CipherFormat.linkedDefault)
        db.close()
    }

    func testTheCommonCaseDerivesOnceAndAnOlderFileOncePerFormatTriedThenRemembers() throws {
        let current = try makeDatabase("current.db", provider: PassphraseKeyProvider("p"))
        let provider = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "p")
        let pool = try FMDatabasePool(path: current, keyProvider: provider)
        // Two blocks inside at once for certain: the pool opens a second connection.
        let together = Rendezvous(parties: 2)
        onThreads(8) { _ in
            pool.inDatabase { db in
                XCTAssertEqual(db.string(forQuery: "select a from t"), "in default")
                XCTAssertTrue(together.arrive(), "two blocks at once")
            }
        }
        XCTAssertGreaterThan(pool.countOfOpenDatabases, 1)
        pool.releaseAllDatabases()
        XCTAssertEqual(
            provider.derivationCount, 1, "a file in the linked default format: one derivation for the whole pool")

        let older = try makeDatabase(
            "older.db", provider: PassphraseKeyProvider("p"), settings: CipherSettings(format: olderFormat))
        let olderProvider = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "p")
        let olderPool = try FMDatabasePool(path: older, keyProvider: olderProvider)
        let expected = olderFormat
        let olderTogether = Rendezvous(parties: 2)
        onThreads(8) { _ in
            olderPool.inDatabase { db in
                XCTAssertEqual(db.cipherFormat, expected)
                XCTAssertTrue(olderTogether.arrive(), "two blocks at once")
            }
        }
        XCTAssertGreaterThan(olderPool.countOfOpenDatabases, 1)
        olderPool.releaseAllDatabases()
        XCTAssertEqual(
            olderProvider.derivationCount, 2,
            "the default format tried once, then the older one, remembered for every other connection")
        XCTAssertEqual(CipherFormatHints.format(forSalt: try salt(older)), olderFormat)
    }

    func salt(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16)
    }

    // MARK: - Files from the other line's shell

    /// A SQLCipher 4 database made by the 4.x shell, as an iOS app leaves it when it is suspended or killed:
    /// default settings, WAL mode, the last transactions still in a non-empty -wal. (A clean close would
    /// checkpoint and delete the WAL, so the files are copied by the shell while its connection is open.)
    func makeSQLCipher4File(_ name: String, key: String = "'app passphrase'") throws -> String {
        let shell = try shell("FMDB_SQLCIPHER4_SHELL")
        let path = directory.path(name)
        let source = directory.path("source-" + name)
        let result = try runSQLCipherShell(
            shell, source,
            """
            PRAGMA key = \(key);
            PRAGMA journal_mode = WAL;
            PRAGMA wal_autocheckpoint = 0;
            CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
            INSERT INTO notes (body) VALUES ('written on iOS');
            INSERT INTO notes (body) VALUES ('still in the WAL');
            .system cp '\(source)' '\(path)' && cp '\(source)-wal' '\(path)-wal'
            """)
        XCTAssertEqual(result.status, 0, result.stderr)
        return path
    }

    func testSQLCipher4FileFromAnAppOpensOnSQLCipher4OrIsToldApartOnSQLCipher3() throws {
        let path = try makeSQLCipher4File("app.db")
        let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            XCTAssertGreaterThan(wal?.intValue ?? 0, 0, "the fixture keeps rows in its -wal")
            try db.setKey(using: PassphraseKeyProvider("app passphrase"))
            XCTAssertEqual(db.cipherFormat, .v4)
            XCTAssertEqual(db.int(forQuery: "select count(*) from notes"), 2)
            XCTAssertTrue(db.executeUpdate("insert into notes (body) values ('written on Linux')"))
            XCTAssertTrue(db.rekey("rotated on Linux"))
            db.close()
            let (format, _) = try open(
                path, PassphraseKeyProvider("rotated on Linux"), settings: CipherSettings(format: .v4))
            XCTAssertEqual(format, .v4)
        } else {
            XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("app passphrase"))) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_FORMAT), "the right key to a SQLCipher 4 file")
                XCTAssertTrue(nsError(error).localizedDescription.contains("SQLCipher 4 database (the key is right)"))
                XCTAssertTrue(nsError(error).localizedDescription.contains("bookworm-backports"))
            }
            XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("not the key"))) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_NOTADB), "a wrong key is still a wrong key")
            }
            XCTAssertThrowsError(
                try db.setKey(using: PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "app passphrase"))
            ) { error in
                XCTAssertEqual(
                    nsError(error).code, Int(SQLITE_FORMAT),
                    "the compatible provider derives SQLCipher 4's key for the check")
            }
        }
    }

    /// The one check behind code 24 from setKey(using:) and attachDatabase: on 3.x, SQLITE_FORMAT for the
    /// right key to a SQLCipher 4 file; nil for a wrong key, an explicit format, and a file 3.x reads; on
    /// 4.x nil (the file opens there).
    func testUnreadableSQLCipher4ErrorIsCode24ForTheRightKeyOnSQLCipher3Only() throws {
        let path = try makeSQLCipher4File("v4.db")
        let fileSalt = try salt(path)
        let right = PassphraseKeyProvider("app passphrase")
        func check(
            _ provider: any KeyProvider, _ path: String,
            settings: CipherSettings = CipherSettings()
        ) throws -> FMDatabaseError? {
            CipherFormat.unreadableSQLCipher4Error(
                atPath: path, salt: try salt(path), provider: provider,
                settings: settings, action: "attach")
        }
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            XCTAssertNil(try check(right, path))
        } else {
            let error = try XCTUnwrap(try check(right, path))
            XCTAssertEqual(error.resultCode, SQLITE_FORMAT)
            XCTAssertEqual(error.message, CipherFormat.sqlcipher4Unavailable(action: "attach"))
        }
        XCTAssertNil(try check(PassphraseKeyProvider("not the key"), path))
        XCTAssertNil(try check(right, path, settings: CipherSettings(format: .v3)))
        let older = try makeDatabase("older.db", provider: right, settings: CipherSettings(format: olderFormat))
        XCTAssertNotEqual(try salt(older), fileSalt)
        XCTAssertNil(try check(right, older))
    }

    /// attachDatabase makes the same decision as setKey(using:): on 3.x the right key to a SQLCipher 4 file is
    /// code 24 saying it cannot attach one, a wrong key code 26; on 4.x the file attaches.
    func testSQLCipher4FileAttachesOnSQLCipher4OrIsCode24OnSQLCipher3() throws {
        let path = try makeSQLCipher4File("attached.db")
        let db = FMDatabase(path: directory.path("main.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        let wrong = PassphraseKeyProvider("not the key"), right = PassphraseKeyProvider("app passphrase")
        XCTAssertThrowsError(try db.attachDatabase(atPath: path, schema: "app", keyProvider: wrong)) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_NOTADB))
        }
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            try db.attachDatabase(atPath: path, schema: "app", keyProvider: right)
            XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM app.notes"), 2)
        } else {
            XCTAssertThrowsError(try db.attachDatabase(atPath: path, schema: "app", keyProvider: right)) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_FORMAT))
                XCTAssertTrue(nsError($0).localizedDescription.contains("cannot attach SQLCipher 4 files"))
            }
            var schemas: [String] = []
            if let rs = db.executeQuery("PRAGMA database_list") {
                while rs.next() { schemas.append(rs.string(forColumn: "name") ?? "") }
            }
            XCTAssertEqual(schemas, ["main"], "nothing stays attached")
        }
    }

    func testSQLCipher4RawKeyFileAndBadInputOnEitherLine() throws {
        let key = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 9 &+ 1) })
        let hex = key.map { String(format: "%02x", $0) }.joined()
        let path = try makeSQLCipher4File("raw.db", key: "\"x'\(hex)'\"")
        let fileSalt = try salt(path)
        let raw = try RawKeyProvider(key: key)
        // The page-1 check against the bytes SQLCipher 4 wrote: right and wrong keys.
        XCTAssertTrue(
            SQLCipher4Verifier.isSQLCipher4File(atPath: path, salt: fileSalt) {
                try raw.key(for: KeyRequest(databasePath: path, salt: fileSalt))
            })
        XCTAssertFalse(
            SQLCipher4Verifier.isSQLCipher4File(atPath: path, salt: fileSalt) {
                try .raw(Data(repeating: 1, count: 32))
            })
        XCTAssertTrue(
            SQLCipher4Verifier.isSQLCipher4File(
                atPath: try makeSQLCipher4File("pass.db"), salt: try salt(directory.path("pass.db"))
            ) {
                .passphrase("app passphrase")
            })

        let expectedCode = CipherFormat.v4.isSupportedByLinkedSQLCipher ? nil : Int(SQLITE_FORMAT)
        if let expectedCode {
            XCTAssertThrowsError(try open(path, raw)) { XCTAssertEqual(nsError($0).code, expectedCode) }
        }
        // A tampered page 1 (one ciphertext byte) and a truncated file: code 26 with the right key, file unchanged.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[100] ^= 0x01
        let tampered = directory.path("tampered.db")
        try bytes.write(to: URL(fileURLWithPath: tampered))
        let truncated = directory.path("truncated.db")
        try bytes.prefix(2048).write(to: URL(fileURLWithPath: truncated))
        for bad in [tampered, truncated] {
            let before = try Data(contentsOf: URL(fileURLWithPath: bad))
            XCTAssertThrowsError(try open(bad, raw)) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_NOTADB), bad)
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: bad)), before, "\(bad) unchanged")
        }
    }

    func testSQLCipher3ShellFileWithCustomSettingsOpensWithExplicitSettings() throws {
        let shell = try shell("FMDB_SQLCIPHER3_SHELL")
        let path = directory.path("custom3.db")
        let made = try runSQLCipherShell(
            shell, path,
            """
            PRAGMA key = 'custom';
            PRAGMA cipher_page_size = 4096;
            PRAGMA kdf_iter = 100000;
            CREATE TABLE t (a);
            INSERT INTO t VALUES ('custom v3');
            """)
        XCTAssertEqual(made.status, 0, made.stderr)
        let settings = CipherSettings(pageSize: 4096, kdfIterations: 100_000, format: .v3)
        let (format, row) = try open(path, PassphraseKeyProvider("custom"), settings: settings)
        XCTAssertEqual(format, .v3)
        XCTAssertEqual(row, "custom v3")
        // A wrong kdf_iter is a wrong key: code 26, the file unchanged.
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertThrowsError(
            try open(
                path, PassphraseKeyProvider("custom"),
                settings: CipherSettings(pageSize: 4096, kdfIterations: 64_000, format: .v3))
        ) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_NOTADB))
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)
        // Without settings the format search cannot guess custom settings: a clear code 26 too.
        XCTAssertThrowsError(try open(path, PassphraseKeyProvider("custom"))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_NOTADB))
        }
    }

    /// The interop matrix's remaining cells: a file this library writes by default, in the other line's shell.
    func testOurDefaultFileInTheOtherLinesShell() throws {
        let ours = try makeDatabase("ours.db", provider: PassphraseKeyProvider("cross"))
        let select = "PRAGMA key = 'cross';\nSELECT a FROM t;\n"
        if CipherFormat.linkedDefault == .v4 {
            // A SQLCipher 4 file: the 3.4.1 shell cannot read it.
            let shell3 = try shell("FMDB_SQLCIPHER3_SHELL")
            let read = try runSQLCipherShell(shell3, ours, select)
            XCTAssertTrue(read.stderr.contains("not a database"), read.stderr)
        } else {
            // A SQLCipher 3 file: the 4.x shell reads it after PRAGMA cipher_compatibility = 3, not before.
            let shell4 = try shell("FMDB_SQLCIPHER4_SHELL")
            let plain = try runSQLCipherShell(shell4, ours, select)
            XCTAssertTrue(plain.stderr.contains("not a database"), plain.stderr)
            let compat = try runSQLCipherShell(
                shell4, ours, "PRAGMA key = 'cross';\nPRAGMA cipher_compatibility = 3;\nSELECT a FROM t;\n")
            XCTAssertEqual(compat.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "in default", compat.stderr)
        }
    }

    func testSQLCipher3ShellFileOpensHereAndOurV3FileOpensInIt() throws {
        let shell = try shell("FMDB_SQLCIPHER3_SHELL")
        let path = directory.path("shell3.db")
        let made = try runSQLCipherShell(
            shell, path, "PRAGMA key = 'three';\nCREATE TABLE t (a);\nINSERT INTO t VALUES ('from 3.4.1');\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        for provider in [
            PassphraseKeyProvider("three") as any KeyProvider,
            PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "three"),
        ] {
            let (format, row) = try open(path, provider)
            XCTAssertEqual(format, .v3)
            XCTAssertEqual(row, "from 3.4.1")
        }
        let ours = try makeDatabase(
            "ours3.db", provider: PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "three", format: .v3),
            settings: CipherSettings(format: .v3))
        let read = try runSQLCipherShell(shell, ours, "PRAGMA key = 'three';\nSELECT a FROM t;\n")
        XCTAssertEqual(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "in SQLCipher 3", read.stderr)
    }
}
