import FMDB
import Foundation
import XCTest

/// How `FMDatabase.inTransaction` ends its transaction: what it reports when SQLite rolled the transaction
/// back, and what it leaves when its block throws.
final class TransactionFormEndTests: XCTestCase {
    /// The error reported when SQLite rolled the transaction back keeps the failed statement's full cause:
    /// its extended code (2067, `SQLITE_CONSTRAINT_UNIQUE`, not only 19) and SQLite's message.
    func testTheReportedRollbackKeepsTheExtendedCodeAndMessageOfItsCause() throws {
        let db = FMDatabase(path: nil)
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeUpdate("create table u (a integer unique)"))
        XCTAssertTrue(db.executeUpdate("insert into u values (1)"))
        var later: FMDatabaseError?
        XCTAssertThrowsError(
            try db.inTransaction(.immediate) { db in
                XCTAssertFalse(db.executeUpdate("insert or rollback into u values (1)"))
                do {
                    try db.executeUpdate("insert into u values (2)", values: nil)
                } catch {
                    later = error as? FMDatabaseError
                }
            }
        ) { error in
            let reported = error as? FMDatabaseError
            XCTAssertEqual(reported?.transactionWasRolledBack, true, "\(error)")
            XCTAssertEqual(reported?.resultCode, SQLITE_CONSTRAINT, "\(error)")
            XCTAssertEqual(reported?.extendedCode, 2067, "SQLITE_CONSTRAINT_UNIQUE: \(error)")
            XCTAssertTrue(reported?.message.contains("UNIQUE constraint failed: u.a") == true, "\(error)")
        }
        XCTAssertEqual(later?.extendedCode, 516, "the later statement was refused")
        XCTAssertTrue(
            later?.message.contains("SQLite error 2067: UNIQUE constraint failed") == true,
            "\(String(describing: later))")
        XCTAssertEqual(db.int(forQuery: "select count(*) from u"), 1, "nothing of the block was committed")
    }

    /// A block that throws on its own (SQLite ended nothing) leaves no transaction open: the form rolls it
    /// back, and the connection's next statement is committed on its own, without the block's.
    func testABlockThatThrowsLeavesNoTransactionOpen() throws {
        struct Gave: Error {}
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("form-end-\(UUID().uuidString).db")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeUpdate("create table t (v integer)"))
        XCTAssertThrowsError(
            try db.inTransaction(.immediate) { db in
                try db.executeUpdate("insert into t values (1)", values: nil)
                throw Gave()
            }
        ) { XCTAssertTrue($0 is Gave, "\($0)") }
        XCTAssertFalse(db.isInTransaction, "rolled back when the block threw")
        XCTAssertTrue(db.executeUpdate("insert into t values (2)"))
        let reader = FMDatabase(path: path)
        XCTAssertTrue(reader.open())
        defer { reader.close() }
        XCTAssertEqual(reader.int(forQuery: "select group_concat(v) from t"), 2, "only the later row is on disk")
    }

    /// A form's own COMMIT (which SQLite's commit hook sees while the form is open) leaves nothing behind for
    /// the connection's next form: transactions in a row each commit.
    func testTransactionsInARowOnOneConnectionEachCommit() throws {
        let db = FMDatabase(path: nil)
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertTrue(db.executeUpdate("create table t (v integer)"))
        for value in 1...3 {
            try db.inTransaction(.deferred) { db in try db.executeUpdate("insert into t values (?)", values: [value]) }
            XCTAssertNil(db.inSavePoint { _ in XCTAssertTrue(db.executeUpdate("insert into t values (0)")) })
        }
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 6)
    }
}
