@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// SQL text cannot change or drop the key (Core/KeyedAuthorizer.swift).
final class KeyedAuthorizerTests: FMDBCipherTestCase {
    static let rawKey = Data((0..<32).map { UInt8($0 &* 7 &+ 3) })

    func provider() throws -> RawKeyProvider { try RawKeyProvider(key: Self.rawKey) }

    /// A keyed database with a table `t` holding `rows` rows.
    func makeKeyedDatabase(_ name: String = "k.db", journalMode: String = "delete", rows: Int = 3) throws -> (
        FMDatabase, String
    ) {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: provider())
        XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = \(journalMode)"), journalMode)
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
        for i in 0..<rows { XCTAssertTrue(db.executeUpdate("INSERT INTO t (v) VALUES (?)", "row \(i)")) }
        return (db, path)
    }

    /// The number of rows of `t` and the integrity check, read through a fresh connection with the real key.
    func contentsWithRealKey(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws -> (
        rows: Int32, integrity: String?
    ) {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open(), file: file, line: line)
        defer { db.close() }
        try db.setKey(using: provider())
        return (db.int(forQuery: "SELECT count(*) FROM t"), db.string(forQuery: "PRAGMA integrity_check"))
    }

    /// Every PRAGMA of SQLCipher 3.4.1 and 4.x that sets or changes a key, the cipher, the KDF, the page
    /// layout or where temporary data goes — as SQL text would spell it. Names from 3.4.1's
    /// `sqlcipher_codec_pragma` (crypto.c) and SQLite 3.15's pragma.c (key, rekey, hexkey, hexrekey,
    /// activate_extensions), and from SQLCipher 4.x's src/sqlcipher.c (cipher_compatibility, cipher_salt,
    /// cipher_hmac_algorithm, cipher_kdf_algorithm, cipher_plaintext_header_size, cipher_default_*,
    /// cipher_log*, cipher_memory_security ...). On 3.4.1 the 4.x-only names are unknown PRAGMAs: they are
    /// refused all the same, so a file moved to a 4.x build keeps the guard.
    var refusedOnKeyedConnections: [String] { Self.refusedOnKeyedConnectionsOnly + refusedOnEveryConnection }

    static let refusedOnKeyedConnectionsOnly: [String] = [
        // Keys.
        "PRAGMA key = 'other'", "PRAGMA key('other')", "PRAGMA main.key = 'other'", "PRAGMA key",
        "PRAGMA KEY = 'other'",
        "PRAGMA \"rekey\" = 'other'", "PRAGMA Cipher_Use_HMAC = off",
        "PRAGMA rekey = 'other'", "PRAGMA main.rekey = 'other'",
        "PRAGMA hexkey = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff'",
        "PRAGMA hexrekey = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff'",
        "PRAGMA textkey = 'other'", "PRAGMA textrekey = 'other'",
        // Acts without a value.
        "PRAGMA cipher_migrate",
        // KDF, cipher, page layout (3.4.1 and 4.x).
        "PRAGMA kdf_iter = 1", "PRAGMA kdf_iter(1)", "PRAGMA main.kdf_iter = 1", "PRAGMA fast_kdf_iter = 1",
        "PRAGMA rekey_kdf_iter = 1", "PRAGMA cipher = 'aes-128-cbc'", "PRAGMA rekey_cipher = 'aes-128-cbc'",
        "PRAGMA page_size = 4096", "PRAGMA cipher_page_size = 4096", "PRAGMA cipher_use_hmac = OFF",
        "PRAGMA main.cipher_use_hmac = OFF", "PRAGMA cipher_hmac_pgno = be", "PRAGMA cipher_hmac_salt_mask = \"x'00'\"",
        "PRAGMA cipher_store_pass = ON", "PRAGMA cipher_add_random = \"x'00112233'\"",
        // 4.x only.
        "PRAGMA cipher_compatibility = 1", "PRAGMA cipher_plaintext_header_size = 32",
        "PRAGMA cipher_salt = \"x'00112233445566778899aabbccddeeff'\"", "PRAGMA cipher_hmac_algorithm = HMAC_SHA1",
        "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA1",
        // Temporary data.
        "PRAGMA temp_store = FILE", "PRAGMA temp_store = 1", "PRAGMA temp_store = DEFAULT",
        "PRAGMA temp_store_directory = '/tmp'", "PRAGMA activate_extensions = 'see-7bb07b8d471d642e'",
    ]

    /// Process-wide SQLCipher settings: refused on every connection, keyed or not.
    var refusedOnEveryConnection: [String] {
        [
            "PRAGMA cipher_default_kdf_iter = 1", "PRAGMA cipher_default_page_size = 4096",
            "PRAGMA cipher_default_use_hmac = OFF", "PRAGMA cipher_default_plaintext_header_size = 32",
            "PRAGMA cipher_default_hmac_algorithm = HMAC_SHA1",
            "PRAGMA cipher_default_kdf_algorithm = PBKDF2_HMAC_SHA1",
            "PRAGMA cipher_default_compatibility = 1", "PRAGMA cipher_log = '\(directory.path("log"))'",
            "PRAGMA cipher_log_level = DEBUG", "PRAGMA cipher_log_source = ANY",
            "PRAGMA cipher_profile = '\(directory.path("profile"))'", "PRAGMA cipher_memory_security = ON",
            "PRAGMA cipher_trace = '\(directory.path("trace"))'",
        ]
    }

    /// `cAPICode`: what the C API answers. SQLite reports a refused function as SQLITE_ERROR ("not authorized
    /// to use function"); the library's APIs report SQLITE_AUTH for every refusal.
    func assertRefused(
        _ db: FMDatabase, _ sql: String, cAPICode: Int32 = SQLITE_AUTH, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        // executeUpdate (sqlite3_prepare_v2 + step).
        XCTAssertFalse(db.executeUpdate(sql), sql, file: file, line: line)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, "executeUpdate: \(sql)", file: file, line: line)
        XCTAssertTrue(
            db.lastErrorMessage().contains("refused"), "\(sql): \(db.lastErrorMessage())", file: file, line: line)
        // executeStatements (sqlite3_exec).
        XCTAssertFalse(db.executeStatements(sql), sql, file: file, line: line)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, "executeStatements: \(sql)", file: file, line: line)
        // executeQuery.
        XCTAssertNil(db.executeQuery(sql), sql, file: file, line: line)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, "executeQuery: \(sql)", file: file, line: line)
        // The C API on sqliteHandle: sqlite3_exec and sqlite3_prepare_v2.
        guard let handle = db.sqliteHandle.map(OpaquePointer.init) else {
            return XCTFail("no handle", file: file, line: line)
        }
        XCTAssertEqual(
            sqlite3_exec(handle, sql, nil, nil, nil), cAPICode, "sqlite3_exec: \(sql)", file: file, line: line)
        var stmt: OpaquePointer?
        XCTAssertEqual(
            sqlite3_prepare_v2(handle, sql, -1, &stmt, nil), cAPICode, "sqlite3_prepare_v2: \(sql)", file: file,
            line: line)
        sqlite3_finalize(stmt)
    }

    func testEveryKeyAndCipherPragmaIsRefusedOnAKeyedConnectionAndTheKeyStillWorks() throws {
        for mode in ["delete", "wal"] {
            let (db, path) = try makeKeyedDatabase("\(mode).db", journalMode: mode)
            var expectedRows: Int32 = 3
            for sql in refusedOnKeyedConnections {
                assertRefused(db, sql)
                // The connection still writes under the real key, and a fresh connection reads it with that key.
                XCTAssertTrue(db.executeUpdate("INSERT INTO t (v) VALUES (?)", sql), "\(mode): write after \(sql)")
                expectedRows += 1
                let after = try contentsWithRealKey(path)
                XCTAssertEqual(after.rows, expectedRows, "\(mode): after \(sql)")
                XCTAssertEqual(after.integrity, "ok", "\(mode): after \(sql)")
            }
            XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2", "temp_store stays MEMORY")
            db.close()
            XCTAssertEqual(try contentsWithRealKey(path).rows, expectedRows)
        }
        for leftover in ["log", "profile", "trace"] {
            XCTAssertFalse(
                FileManager.default.fileExists(atPath: directory.path(leftover)), "no SQLCipher \(leftover) file")
        }
    }

    func testAConnectionKeyedBySQLTextCannotThenWeakenItsCipher() throws {
        // FMDB code ported from Apple platforms may key with SQL: from then on the keyed rules apply, so
        // SQL cannot write a new file with one KDF iteration and no HMAC (the KDF floor holds here too).
        let path = directory.path("sql-keyed.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeStatements("PRAGMA key = 'hunter2'"))
        for sql in [
            "PRAGMA kdf_iter = 1", "PRAGMA cipher_use_hmac = OFF", "PRAGMA cipher_page_size = 512",
            "PRAGMA key = 'other'", "PRAGMA temp_store = FILE",
        ] {
            XCTAssertFalse(db.executeStatements(sql), sql)
            XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, sql)
        }
        XCTAssertTrue(db.executeStatements("CREATE TABLE t (a); INSERT INTO t VALUES (1)"))
        db.close()
        // The file was written with SQLCipher's own defaults: it opens with PRAGMA key and nothing else.
        let reader = FMDatabase(path: path)
        XCTAssertTrue(reader.open())
        try reader.setKey(using: PassphraseKeyProvider("hunter2"))
        XCTAssertEqual(reader.int(forQuery: "SELECT count(*) FROM t"), 1)
        XCTAssertEqual(reader.string(forQuery: "PRAGMA cipher_use_hmac"), "1")
        reader.close()
    }

    func testTheProcessWideHMACSaltMaskIsRefusedEverywhere() throws {
        let db = FMDatabase(path: directory.path("mask.db"))
        XCTAssertTrue(db.open())
        XCTAssertFalse(db.executeStatements("PRAGMA key = 'anything'; PRAGMA cipher_hmac_salt_mask = \"x'00'\""))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        db.close()
        let plain = FMDatabase(path: directory.path("mask-plain.db"))
        XCTAssertTrue(plain.open())
        XCTAssertFalse(plain.executeStatements("PRAGMA cipher_hmac_salt_mask = \"x'00'\""))
        XCTAssertEqual(plain.lastErrorCode(), SQLITE_AUTH)
        plain.close()
        // Another connection of the process still opens a keyed file with the right key.
        let (keyed, path) = try makeKeyedDatabase()
        keyed.close()
        XCTAssertEqual(try contentsWithRealKey(path).rows, 3)
    }

    func testSQLWithAKeyPragmaNeverReachesALogOrAnError() throws {
        let (db, _) = try makeKeyedDatabase()
        let capture = LogCapture()
        db.logger = capture.logger()
        db.traceExecution = true
        let secret = "NEW-SECRET-PASSPHRASE"
        XCTAssertFalse(db.executeUpdate("PRAGMA rekey = '\(secret)'"))
        XCTAssertFalse(db.executeStatements("PRAGMA main.\"hexkey\" = '\(secret)'"))
        XCTAssertThrowsError(try db.executeQuery("PRAGMA key = '\(secret)'", values: nil)) { error in
            XCTAssertFalse("\(error)".contains(secret))
            XCTAssertFalse(((error as NSError).userInfo["sql"] as? String ?? "").contains(secret))
        }
        XCTAssertFalse("\(db.lastError())".contains(secret))
        XCTAssertFalse(capture.all.isEmpty, "the trace and the errors were logged")
        for line in capture.all { XCTAssertFalse(line.contains(secret), line) }
        // Other SQL is still shown as it is.
        XCTAssertEqual(FMDatabaseError.loggable("SELECT keys FROM t"), "SELECT keys FROM t")
        XCTAssertEqual(FMDatabaseError.loggable("PRAGMA cipher_version"), "PRAGMA cipher_version")
        db.close()
    }

    func testProcessWideCipherDefaultsAreRefusedOnPlaintextConnectionsToo() throws {
        let db = FMDatabase(path: directory.path("plain.db"))
        XCTAssertTrue(db.open())
        for sql in refusedOnEveryConnection { assertRefused(db, sql) }
        XCTAssertEqual(
            db.string(forQuery: "PRAGMA cipher_default_kdf_iter"),
            SQLCipherRuntime.majorVersion >= 4 ? "256000" : "64000",
            "the default is unchanged")
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_default_use_hmac"), "1")
        // What only concerns this plaintext file stays allowed.
        XCTAssertTrue(db.executeStatements("PRAGMA page_size = 4096; PRAGMA temp_store = FILE; CREATE TABLE t (a)"))
        XCTAssertTrue(
            db.executeStatements("ATTACH DATABASE '\(directory.path("other.db"))' AS other; DETACH DATABASE other"))
        db.close()
    }

    func testReadingCipherPragmasStaysAllowed() throws {
        let (db, _) = try makeKeyedDatabase()
        // The linked line's own defaults: SQLCipher 3 (64,000 iterations, 1024-byte pages) or 4 (256,000, 4096).
        let v4 = SQLCipherRuntime.majorVersion >= 4
        let (iterations, pageSize) = v4 ? ("256000", "4096") : ("64000", "1024")
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_version")?.hasPrefix(SQLCipherRuntime.version ?? "?"), true)
        XCTAssertEqual(db.string(forQuery: "PRAGMA kdf_iter"), iterations)
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_page_size"), pageSize)
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_use_hmac"), "1")
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_default_kdf_iter"), iterations)
        XCTAssertEqual(db.string(forQuery: "PRAGMA page_size"), pageSize)
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
        XCTAssertNotNil(db.cipherProvider)
        // Ordinary PRAGMAs with values are not the guard's business.
        XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = wal"), "wal")
        XCTAssertTrue(db.executeUpdate("PRAGMA user_version = 7"))
        XCTAssertEqual(db.userVersion, 7)
        db.close()
    }

    func testVacuumAndTemporaryAttachStayAllowed() throws {
        let (db, path) = try makeKeyedDatabase(rows: 50)
        XCTAssertTrue(db.executeUpdate("DELETE FROM t WHERE id % 2 = 0"))
        XCTAssertTrue(db.executeUpdate("VACUUM"), db.lastErrorMessage())
        // ATTACH '' is a temporary database, in memory under temp_store = MEMORY: nothing reaches a file.
        XCTAssertTrue(
            db.executeStatements("ATTACH DATABASE '' AS scratch; CREATE TABLE scratch.s (a); DETACH DATABASE scratch"),
            db.lastErrorMessage())
        db.close()
        let after = try contentsWithRealKey(path)
        XCTAssertEqual(after.rows, 25)
        XCTAssertEqual(after.integrity, "ok")
    }

    // MARK: - SQL text that would change or weaken the key of a file in use: refused, the file keeps its key

    func testPragmaKeyThenInsertIsRefusedAndTheFileKeepsItsKey() throws {
        let (db, path) = try makeKeyedDatabase()
        XCTAssertFalse(
            db.executeStatements(
                "INSERT INTO t (v) VALUES ('before'); PRAGMA key = 'other'; INSERT INTO t (v) VALUES ('after')"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        var rows: [String] = []
        XCTAssertThrowsError(try db.executeScript("PRAGMA key='other'; INSERT INTO t (v) VALUES ('script')") { _ in }) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_AUTH))
        }
        if let rs = db.executeQuery("SELECT v FROM t ORDER BY id") {
            while rs.next() { rows.append(rs.string(forColumnIndex: 0) ?? "") }
        }
        XCTAssertEqual(rows, ["row 0", "row 1", "row 2", "before"], "statements after the refused PRAGMA did not run")
        db.close()
        let after = try contentsWithRealKey(path)
        XCTAssertEqual(after.rows, 4)
        XCTAssertEqual(after.integrity, "ok")
    }

    func testPragmaCipherUseHmacOffThenAWriteLeavesAReadableFile() throws {
        let (db, path) = try makeKeyedDatabase(journalMode: "wal")
        XCTAssertFalse(db.executeStatements("PRAGMA cipher_use_hmac = OFF; INSERT INTO t (v) VALUES ('x')"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(db.executeUpdate("INSERT INTO t (v) VALUES ('written after the refusal')"))
        db.close()
        let after = try contentsWithRealKey(path)
        XCTAssertEqual(after.rows, 4)
        XCTAssertEqual(after.integrity, "ok")
    }

    /// SQLCipher 3.4.1's rekey under another process's lock returns OK and leaves pages under two keys;
    /// `PRAGMA rekey` in SQL text reached it without the library's checks. Now it never runs.
    func testPragmaRekeyUnderAnotherProcesssLockIsRefused() throws {
        let shell = try lineShell()
        let (db, path) = try makeKeyedDatabase(rows: 200)
        let hexKey = Self.rawKey.map { String(format: "%02x", $0) }.joined()
        // The other process holds the write lock until its input ends, which this test decides. Its BEGIN
        // waits for the lock (.timeout) should this test's own probe below hold it at that moment.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: shell)
        holder.arguments = [path]
        let input = Pipe()
        holder.standardInput = input
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        input.fileHandleForWriting.write(
            Data(
                (".timeout 60000\nPRAGMA key = \"x'\(hexKey)'\";\nBEGIN IMMEDIATE;\nINSERT INTO t (v) VALUES "
                    + "('other');\n").utf8))
        // Wait until it holds the lock (up to a minute: the shell starts at its own pace on a loaded machine).
        db.maxBusyRetryTimeInterval = 0
        var locked = false
        let patience = Date().addingTimeInterval(60)
        while !locked, holder.isRunning, Date() < patience {
            if db.beginImmediateTransaction() {
                XCTAssertTrue(db.rollback())
                usleep(10_000)
            } else {
                locked = db.lastErrorCode() == SQLITE_BUSY
            }
        }
        XCTAssertTrue(locked, "the shell holds the write lock")
        XCTAssertFalse(db.executeStatements("PRAGMA rekey = 'other'"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        assertRefused(db, "PRAGMA rekey = 'other'")
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        db.maxBusyRetryTimeInterval = 2
        XCTAssertTrue(db.executeUpdate("INSERT INTO t (v) VALUES ('after')"))
        db.close()
        let after = try contentsWithRealKey(path)
        XCTAssertEqual(after.integrity, "ok")
        XCTAssertEqual(after.rows, 201, "the shell's transaction was rolled back when its input ended; ours committed")
    }

    // MARK: - ATTACH and sqlcipher_export

    func testAttachWithAnEmptyKeyAndSqlcipherExportAreRefusedInSQLText() throws {
        let (db, _) = try makeKeyedDatabase()
        let plain = directory.path("plain-copy.db")
        for sql in [
            "ATTACH DATABASE '\(plain)' AS p KEY ''",
            "ATTACH DATABASE '\(plain)' AS p",
        ] {
            assertRefused(db, sql)
        }
        for sql in ["SELECT sqlcipher_export('p')", "SELECT SQLCipher_Export('main')"] {
            assertRefused(db, sql, cAPICode: SQLITE_ERROR)
        }
        XCTAssertFalse(
            db.executeStatements(
                "ATTACH DATABASE '\(plain)' AS p KEY ''; SELECT sqlcipher_export('p'); DETACH DATABASE p"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: plain) && DatabaseFile.kind(atPath: plain) == .plaintext,
            "no plaintext copy was written")
        db.close()
    }

    func testTheLibrarysOwnAttachAndExportStillWork() throws {
        let (db, _) = try makeKeyedDatabase()
        // Decrypt on purpose, through the API that says so in code.
        let plain = directory.path("decrypted.db")
        try db.attachDatabase(atPath: plain, schema: "plain", keyProvider: nil)
        try db.exportContents(to: "plain")
        try db.detachDatabase(schema: "plain")
        // Encrypted copy with settings: the library's own cipher PRAGMAs run.
        let copy = directory.path("copy.db")
        try db.attachDatabase(
            atPath: copy, schema: "copy", keyProvider: provider(), settings: CipherSettings(pageSize: 4096))
        try db.exportContents(to: "copy")
        try db.detachDatabase(schema: "copy")
        // SQL text is still refused afterwards.
        assertRefused(db, "PRAGMA kdf_iter = 1")
        db.close()
        XCTAssertEqual(DatabaseFile.kind(atPath: plain), .plaintext)
        let check = FMDatabase(path: plain)
        XCTAssertTrue(check.open())
        XCTAssertEqual(check.int(forQuery: "SELECT count(*) FROM t"), 3)
        check.close()
        let encrypted = FMDatabase(path: copy)
        XCTAssertTrue(encrypted.open())
        try encrypted.setKey(using: provider(), settings: CipherSettings(pageSize: 4096))
        XCTAssertEqual(encrypted.int(forQuery: "SELECT count(*) FROM t"), 3)
        encrypted.close()
    }

    func testAKeyedAttachGuardsAPlaintextMainConnection() throws {
        let db = FMDatabase(path: directory.path("main-plain.db"))
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        try db.attachDatabase(atPath: directory.path("attached.db"), schema: "enc", keyProvider: provider())
        assertRefused(db, "PRAGMA enc.rekey = 'other'")
        assertRefused(db, "PRAGMA enc.cipher_use_hmac = OFF")
        XCTAssertEqual(
            db.string(forQuery: "PRAGMA temp_store"), "2", "temporary data of the encrypted schema stays in memory")
        db.close()
    }
}
