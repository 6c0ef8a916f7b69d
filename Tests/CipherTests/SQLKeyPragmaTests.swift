@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A key PRAGMA in SQL text counts as keying only once SQLCipher has keyed: a connection is keyed when a
/// codec is attached, asked of SQLCipher, never inferred from the statement (Core/KeyedAuthorizer.swift).
/// A connection keyed by SQL gets what one keyed through the API gets, and statements prepared before a
/// key never run unchecked after it.
final class SQLKeyPragmaTests: FMDBCipherTestCase {
    struct FailingProvider: KeyProvider {
        func key(for request: KeyRequest) throws -> DatabaseKey {
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "the secret is not there")
        }
    }

    /// A new file whose `setKey(using:)` failed: the failed-key lockout is in force.
    func lockedOutConnection(_ name: String) throws -> (FMDatabase, String) {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(try db.setKey(using: FailingProvider()))
        return (db, path)
    }

    /// Tries to write a row, then says what the file is: it must never be plaintext.
    func assertNothingPlaintext(_ db: FMDatabase, _ path: String, _ context: String, line: UInt = #line) {
        _ = db.executeStatements("CREATE TABLE secrets (v TEXT); INSERT INTO secrets VALUES ('swordfish')")
        XCTAssertNotEqual(
            DatabaseFile.kind(atPath: path), .plaintext, "\(context): the file was written in plaintext", line: line)
        if let bytes = FileManager.default.contents(atPath: path) {
            XCTAssertNil(bytes.range(of: Data("swordfish".utf8)), "\(context): a row is on disk in clear", line: line)
        }
    }

    func testAKeyPragmaThatKeysNothingDoesNotEndTheFailedKeyLockout() throws {
        for (index, sql) in [
            "PRAGMA key = ''", "PRAGMA hexkey = 'not-hex'", "PRAGMA hexkey = ''", "PRAGMA hexkey = 'abc'",
            "PRAGMA main.key = ''", "PRAGMA textkey = ''",
        ].enumerated() {
            let (db, path) = try lockedOutConnection("lockout-\(index).db")
            XCTAssertFalse(db.executeStatements(sql), sql)
            XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, sql)
            XCTAssertFalse(db.executeUpdate("CREATE TABLE t (v)"), "\(sql): the lockout stays")
            XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, sql)
            assertNothingPlaintext(db, path, sql)
            XCTAssertTrue(DatabaseFile.kind(atPath: path).isNew, "\(sql): nothing was written")
            db.close()
        }
    }

    func testAnOrdinaryPragmaWithAValueDoesNotEndTheLockout() throws {
        let (db, path) = try lockedOutConnection("user-version.db")
        defer { db.close() }
        XCTAssertFalse(db.executeUpdate("PRAGMA user_version = 7"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertFalse(db.executeStatements("PRAGMA journal_mode = wal"))
        assertNothingPlaintext(db, path, "PRAGMA user_version")
        XCTAssertTrue(DatabaseFile.kind(atPath: path).isNew)
    }

    func testAnEmptyOrMalformedKeyPragmaIsRefusedOnAFreshConnection() throws {
        // As setKey("") is: SQLCipher would key nothing (3.4.1 silently).
        for (index, sql) in ["PRAGMA key = ''", "PRAGMA hexkey = 'not-hex'", "PRAGMA hexkey = '0'"].enumerated() {
            let path = directory.path("fresh-\(index).db")
            let db = FMDatabase(path: path)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            XCTAssertFalse(db.executeStatements(sql), sql)
            XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, sql)
            XCTAssertTrue(db.lastErrorMessage().contains("PRAGMA"), db.lastErrorMessage())
            // Not keyed, so not held to the keyed rules: a plaintext database is still the program's choice.
            XCTAssertNil(db.cipherProviderOfThisConnection)
            db.close()
        }
        XCTAssertFalse(FMDatabase(path: directory.path("x.db")).setKey(""), "the API refuses it too")
    }

    func testAConnectionKeyedBySQLGetsTheKeyedSettings() throws {
        let path = directory.path("sql-keyed.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeStatements("PRAGMA key = 'an FMDB-style passphrase'"), db.lastErrorMessage())
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2", "temporary data stays in memory, as with setKey")
        // Asking for what it already has is allowed; anything else is still refused.
        XCTAssertTrue(db.executeStatements("PRAGMA temp_store = MEMORY"), db.lastErrorMessage())
        XCTAssertTrue(db.executeStatements("PRAGMA temp_store = 2"), db.lastErrorMessage())
        XCTAssertFalse(db.executeStatements("PRAGMA temp_store = FILE"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (v)"))
        guard case .encrypted = DatabaseFile.kind(atPath: path) else {
            return XCTFail("the file is \(DatabaseFile.kind(atPath: path)), not encrypted")
        }
    }

    func testTheProgramsOwnTempStoreMemoryIsAllowedAfterSetKey() throws {
        let db = FMDatabase(path: directory.path("api-keyed.db"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: RawKeyProvider(key: Data(repeating: 0x42, count: 32)))
        XCTAssertTrue(db.executeStatements("PRAGMA temp_store = memory"), db.lastErrorMessage())
        XCTAssertFalse(db.executeStatements("PRAGMA temp_store = 0"))
    }

    func testAKeyPragmaAfterTheLockoutKeysAndGetsTheKeyedSettings() throws {
        let (db, path) = try lockedOutConnection("lockout-keyed.db")
        defer { db.close() }
        XCTAssertTrue(db.executeStatements("PRAGMA key = 'typed by hand'"), db.lastErrorMessage())
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (v)"), db.lastErrorMessage())
        XCTAssertFalse(db.executeStatements("PRAGMA kdf_iter = 1"), "keyed rules hold")
        guard case .encrypted = DatabaseFile.kind(atPath: path) else {
            return XCTFail("the file is \(DatabaseFile.kind(atPath: path)), not encrypted")
        }
    }

    func testAnAttachCompiledBeforeSetKeyBlocksTheKey() throws {
        // Prepared on the unkeyed connection, where ATTACH of a file is allowed; run after the key it would
        // attach a plaintext file that INSERT … SELECT could fill.
        let plainPath = directory.path("plain.db")
        let db = FMDatabase(path: directory.path("keyed.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        let attach = try db.prepareStatement("ATTACH DATABASE '\(plainPath)' AS p KEY ''")
        // Compiling the ATTACH was enough: the key is refused until the connection is opened afresh.
        XCTAssertThrowsError(try db.setKey(using: RawKeyProvider(key: Data(repeating: 0x17, count: 32)))) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_MISUSE), "\(error)")
        }
        _ = attach
        XCTAssertNil(db.string(forQuery: "SELECT name FROM pragma_database_list WHERE name = 'p'"), "nothing attached")
        XCTAssertFalse(FileManager.default.fileExists(atPath: plainPath))
    }

    func testAKeyPragmaWhileOtherStatementsArePreparedIsRefused() throws {
        let plainPath = directory.path("plain2.db")
        let db = FMDatabase(path: directory.path("keyed2.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        var attach: PreparedStatement? = try db.prepareStatement("ATTACH DATABASE '\(plainPath)' AS p KEY ''")
        XCTAssertNotNil(attach)
        XCTAssertFalse(db.executeUpdate("PRAGMA key = 'late'"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(db.lastErrorMessage().contains("other statements"), db.lastErrorMessage())
        attach = nil
        XCTAssertTrue(db.executeStatements("PRAGMA key = 'late'"), "alone, it keys: \(db.lastErrorMessage())")
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
    }

    func testARefusedFMDBKeyAfterTheLockoutKeepsTheLockout() throws {
        // FMDB's Bool forms reopen the connection first: the new connection must stay locked out.
        let attempts: [(FMDatabase) -> Bool] = [{ $0.setKey("") }, { $0.setKeyWith(Data()) }]
        for (index, attempt) in attempts.enumerated() {
            let (db, path) = try lockedOutConnection("fmdb-form-\(index).db")
            XCTAssertFalse(attempt(db))
            XCTAssertFalse(db.executeUpdate("CREATE TABLE t (v)"), "attempt \(index): still locked out")
            XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
            assertNothingPlaintext(db, path, "attempt \(index)")
            XCTAssertTrue(DatabaseFile.kind(atPath: path).isNew)
            db.close()
        }
    }

    func testDatabasesAttachedBeforeAKeyAreRefusedOrDetached() throws {
        let plainPath = directory.path("plain-attached.db")
        // Through the API: refused before anything is keyed.
        let api = FMDatabase(path: directory.path("api.db"))
        api.logsErrors = false
        XCTAssertTrue(api.open())
        XCTAssertTrue(api.executeStatements("ATTACH DATABASE '\(plainPath)' AS p"))
        XCTAssertThrowsError(try api.setKey(using: RawKeyProvider(key: Data(repeating: 3, count: 32)))) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_MISUSE), "\(error)")
        }
        api.close()
        // Through SQL text: the key takes, the attached plaintext database goes, and the program is told.
        let sql = FMDatabase(path: directory.path("sql.db"))
        sql.logsErrors = false
        XCTAssertTrue(sql.open())
        defer { sql.close() }
        XCTAssertFalse(sql.executeStatements("ATTACH DATABASE '\(plainPath)' AS p; PRAGMA key = 'k'"))
        XCTAssertEqual(sql.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(sql.lastErrorMessage().contains("detached"), sql.lastErrorMessage())
        XCTAssertTrue(sql.executeUpdate("CREATE TABLE secret (v)"), sql.lastErrorMessage())
        XCTAssertTrue(sql.executeUpdate("INSERT INTO secret VALUES ('swordfish')"))
        XCTAssertFalse(sql.executeStatements("CREATE TABLE p.copy AS SELECT * FROM secret"), "p is gone")
        if let bytes = FileManager.default.contents(atPath: plainPath) {
            XCTAssertNil(bytes.range(of: Data("swordfish".utf8)))
        }
        XCTAssertEqual(sql.string(forQuery: "PRAGMA temp_store"), "2")
    }

    func testAKeyPragmaOnAnAttachedSchemaHoldsTheConnectionToTheKeyedRules() throws {
        let db = FMDatabase(path: directory.path("plain-main.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeStatements("ATTACH DATABASE '\(directory.path("archive.db"))' AS a"))
        XCTAssertTrue(db.executeStatements("PRAGMA a.key = 'k'"), db.lastErrorMessage())
        XCTAssertTrue(db.executeUpdate("CREATE TABLE a.secret (v)"), db.lastErrorMessage())
        XCTAssertEqual(db.connection.flatMap { try? $0.isKeyed(schema: "a") }, true, "SQLCipher keyed a")
        // Keyed: a plaintext copy of a may not be attached and exported.
        XCTAssertFalse(db.executeStatements("ATTACH DATABASE '\(directory.path("copy.db"))' AS p KEY ''"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertFalse(db.executeStatements("PRAGMA a.cipher_use_hmac = OFF"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
    }

    func testAnAttachWithAKeyCannotBeWeakenedLaterInTheSameScript() throws {
        let db = FMDatabase(path: directory.path("plain.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        let attached = directory.path("weak.db")
        XCTAssertFalse(
            db.executeStatements(
                "ATTACH DATABASE '\(attached)' AS e KEY 'k'; PRAGMA e.kdf_iter = 1; PRAGMA e.cipher_use_hmac = OFF; "
                    + "CREATE TABLE e.t (v)"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(DatabaseFile.kind(atPath: attached).isNew, "nothing was written to e")
    }

    func testATemporaryTableRightAfterAKeyPragmaIsRefused() throws {
        let db = FMDatabase(path: directory.path("temp.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertFalse(db.executeStatements("PRAGMA key = 'k'; CREATE TEMP TABLE s AS SELECT 'swordfish' AS v"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        // Settled now: keyed, and temporary data stays in memory.
        XCTAssertEqual(db.string(forQuery: "PRAGMA temp_store"), "2")
        XCTAssertTrue(db.executeStatements("CREATE TEMP TABLE s AS SELECT 'swordfish' AS v"), db.lastErrorMessage())
    }

    func testACachedStatementSettlesAnAttachWithAKeyFirst() throws {
        let db = FMDatabase(path: directory.path("cached.db"))
        db.logsErrors = false
        db.shouldCacheStatements = true
        XCTAssertTrue(db.open())
        defer { db.close() }
        let query = "SELECT count(*) FROM sqlite_master"
        XCTAssertEqual(db.int(forQuery: query), 0)
        let handle = OpaquePointer(try XCTUnwrap(db.sqliteHandle))
        let attach = "ATTACH DATABASE '\(directory.path("keyed.db"))' AS e KEY 'typed by hand'"
        XCTAssertEqual(sqlite3_exec(handle, attach, nil, nil, nil), SQLITE_OK)
        XCTAssertEqual(db.int(forQuery: query), 0, db.lastErrorMessage())
        // The cached statement ran after the keyed attach was settled: temporary data is held in memory.
        var statement: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(handle, "PRAGMA temp_store", -1, &statement, nil), SQLITE_OK)
        defer { sqlite3_finalize(statement) }
        XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
        XCTAssertEqual(sqlite3_column_int(statement, 0), 2)
    }

    func testAKeyPragmaInsideATransactionIsRefused() throws {
        let db = FMDatabase(path: directory.path("txn.db"))
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeStatements("BEGIN"))
        XCTAssertFalse(db.executeStatements("PRAGMA key = 'k'"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(db.lastErrorMessage().contains("transaction"), db.lastErrorMessage())
        XCTAssertTrue(db.executeStatements("ROLLBACK"))
    }
}

extension FMDatabase {
    /// `PRAGMA cipher_provider` on this connection alone (no process-wide fallback): nil unless a codec is attached.
    var cipherProviderOfThisConnection: String? {
        guard let connection else { return nil }
        return (try? connection.pragmaText("PRAGMA cipher_provider")) ?? nil
    }
}
