import FMDB
import Foundation
import TestSupport
import XCTest

/// SQL holding a key PRAGMA never reaches an error's message or a log line, whichever form ran it and
/// whatever SQLite said about it: SQLite's own messages quote the SQL near an error, and FMDB's "query
/// string" misuse message quotes the whole statement.
final class KeyPragmaErrorTextTests: FMDBCipherTestCase {
    let secret = "hunter2-secret"

    /// A fresh connection (key PRAGMAs are allowed before keying), logging into `capture`.
    func connection(_ capture: LogCapture) throws -> FMDatabase {
        let db = FMDatabase(path: directory.path("fresh.db"))
        db.logger = capture.logger()
        XCTAssertTrue(db.open())
        return db
    }

    func assertHidden(
        _ db: FMDatabase, _ capture: LogCapture, _ thrown: Error?, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        var texts = capture.all + [db.lastErrorMessage(), "\(db.lastError())"]
        if let thrown { texts += ["\(thrown)", (thrown as NSError).localizedDescription] }
        XCTAssertNotEqual(db.lastErrorCode(), 0, "the statement should have failed", file: file, line: line)
        for text in texts {
            XCTAssertFalse(text.contains(secret), "the key reached: \(text)", file: file, line: line)
        }
    }

    func testSQLitesMessageAboutAMalformedKeyPragmaIsNotShown() throws {
        // Unterminated: SQLite's message is `unrecognized token: "'hunter2-secret"`.
        let sql = "PRAGMA key = '\(secret)"
        for form in 0..<3 {
            let capture = LogCapture()
            let db = try connection(capture)
            var thrown: Error?
            switch form {
            case 0: XCTAssertFalse(db.executeUpdate(sql))
            case 1: XCTAssertNil(db.executeQuery(sql))
            default:
                do { try db.execute(sql) } catch { thrown = error }
                XCTAssertNotNil(thrown)
            }
            assertHidden(db, capture, thrown)
            if form < 2 {
                XCTAssertTrue(capture.all.contains { $0.contains("DB Error") }, "form \(form) still logs its error")
            }
            db.close()
        }
    }

    /// Other SQL that carries a key: SQLCipher's `ATTACH ... KEY 'secret'` (allowed on an unkeyed
    /// connection), and a key PRAGMA with a comment between its words. Neither the SQL nor SQLite's message
    /// about it is shown, in the error or the log.
    func testAttachWithAKeyAndACommentedKeyPragmaAreHiddenToo() throws {
        let statements = [
            // Fails: the path is a directory.
            "ATTACH DATABASE '\(directory.path(""))' AS e KEY '\(secret)'",
            // Fails at the unterminated literal, which SQLite quotes.
            "PRAGMA/**/key='\(secret)",
            "PRAGMA main . /* the key */ hexkey = x'\(secret)",
        ]
        for sql in statements {
            let capture = LogCapture()
            let db = try connection(capture)
            XCTAssertFalse(db.executeUpdate(sql), sql)
            assertHidden(db, capture, nil)
            XCTAssertTrue(capture.all.contains { $0.contains("DB Error") }, "still logged: \(sql)")
            db.close()
        }
    }

    /// The key guard's own reason is shown (it names no part of the SQL); the key in the SQL is not.
    func testTheKeyGuardsRefusalKeepsItsReasonAndHidesTheKey() throws {
        let capture = LogCapture()
        let db = try connection(capture)
        try db.setKey(using: RawKeyProvider(key: Data(repeating: 0x42, count: 32)))
        XCTAssertFalse(db.executeUpdate("PRAGMA rekey = '\(secret)'"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH)
        XCTAssertTrue(db.lastErrorMessage().contains("PRAGMA rekey"), db.lastErrorMessage())
        XCTAssertFalse(db.lastErrorMessage().contains("is not shown"), db.lastErrorMessage())
        assertHidden(db, capture, nil)
        db.close()
    }

    func testAKeyPragmaThatReturnsARowIsAMisuseWithoutItsText() throws {
        // SQLCipher 4 answers `PRAGMA key` with a row ("ok"): executeUpdate is then a misuse whose message
        // used to quote the statement. On 3.4.1 it returns no row and keys the connection.
        let capture = LogCapture()
        let db = try connection(capture)
        var thrown: Error?
        do { try db.executeUpdate("PRAGMA key = '\(secret)'", values: nil) } catch { thrown = error }
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            XCTAssertNil(thrown)
            throw XCTSkip("SQLCipher 3 returns no row for PRAGMA key")
        }
        XCTAssertEqual((thrown as NSError?)?.code, Int(SQLITE_MISUSE))
        assertHidden(db, capture, thrown)
        db.close()
    }
}
