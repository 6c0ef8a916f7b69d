import FMDB
import Foundation
import TestSupport
import XCTest

/// A transaction a library form began is never half-committed: once SQLite rolled it back after a failed
/// statement, the block's later statements are refused and the form reports the rollback.
final class RolledBackTransactionTests: FMDBTempDBTestCase {
    override class func populateDatabase(_ db: FMDatabase) {
        XCTAssertTrue(db.executeStatements(TransactionRollbackTrigger.schema))
    }

    /// The rows of `t`, read on a connection of its own (what is on disk).
    private var committedRows: Int32 {
        let reader = FMDatabase(path: databasePath)
        XCTAssertTrue(reader.open())
        defer { reader.close() }
        return reader.int(forQuery: "select count(*) from t")
    }

    private func assertRolledBack(
        _ error: Error?, _ outcome: TransactionRollbackTrigger.Outcome, _ trigger: TransactionRollbackTrigger,
        _ form: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        let label = "\(trigger) in \(form)"
        XCTAssertEqual(outcome.triggerCode, trigger.code, label, file: file, line: line)
        XCTAssertFalse(
            outcome.inTransactionAfterTrigger, "SQLite ended the transaction: \(label)", file: file, line: line)
        XCTAssertEqual(outcome.laterCode, 516, "the later statement is refused: \(label)", file: file, line: line)
        XCTAssertTrue(outcome.laterSaysRolledBack, label, file: file, line: line)
        let reported = error as? FMDatabaseError
        XCTAssertNotNil(reported, "the form reports the rollback: \(label)", file: file, line: line)
        XCTAssertEqual(reported?.transactionWasRolledBack, true, label, file: file, line: line)
        XCTAssertEqual(reported?.resultCode, trigger.code, "the cause's code: \(label)", file: file, line: line)
        XCTAssertEqual(committedRows, 0, "nothing of the block is committed: \(label)", file: file, line: line)
        XCTAssertFalse(db.isInTransaction, label, file: file, line: line)
        // The connection runs statements again once the form ended.
        XCTAssertTrue(db.executeUpdate("insert into t values (9)"), label, file: file, line: line)
        XCTAssertTrue(db.executeUpdate("delete from t"), label, file: file, line: line)
    }

    func testInTransactionReportsEveryRollbackAndCommitsNothing() {
        for trigger in TransactionRollbackTrigger.allCases {
            for kind in [FMDBTransactionKind.deferred, .immediate, .exclusive] {
                let outcome = TransactionRollbackTrigger.Outcome()
                var thrown: Error?
                XCTAssertThrowsError(try db.inTransaction(kind) { db in trigger.runBlock(on: db, outcome) }) {
                    thrown = $0
                }
                XCTAssertEqual((db.lastError() as? FMDatabaseError)?.transactionWasRolledBack, true, "\(trigger)")
                assertRolledBack(thrown, outcome, trigger, "inTransaction(\(kind))")
            }
        }
    }

    /// A script run with `executeStatements` prepares and steps its statements inside SQLite: when a statement
    /// its row handler runs makes SQLite roll back the form's transaction, the script's later statements are
    /// refused too, never committed one by one in autocommit.
    func testAScriptsLaterStatementsAreRefusedOnceItsRowHandlerEndedTheTransaction() {
        var thrown: Error?
        var scriptCode: Int32 = 0
        XCTAssertThrowsError(
            try db.inTransaction(.immediate) { db in
                XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                let ran = db.executeStatements("select 1; insert into t values (2); insert into t values (3)") { _ in
                    XCTAssertFalse(db.executeUpdate("insert or rollback into u values (1)"), "the rollback")
                    return 0
                }
                XCTAssertFalse(ran, "the script stops at its first statement after the rollback")
                scriptCode = db.lastExtendedErrorCode()
                XCTAssertFalse(db.executeUpdate("insert into t values (4)"), "refused")
            }
        ) { thrown = $0 }
        XCTAssertEqual(scriptCode, 516, "the script's next statement is refused, not run")
        XCTAssertEqual((thrown as? FMDatabaseError)?.transactionWasRolledBack, true, "\(String(describing: thrown))")
        XCTAssertEqual(committedRows, 0, "nothing of the block, the script's rows included, is committed")
        XCTAssertTrue(db.executeStatements("insert into t values (5); delete from t"), "the connection runs again")
    }

    func testInSavePointReportsEveryRollbackAndCommitsNothing() {
        for trigger in TransactionRollbackTrigger.allCases {
            let outcome = TransactionRollbackTrigger.Outcome()
            let error = db.inSavePoint { _ in trigger.runBlock(on: db, outcome) }
            assertRolledBack(error, outcome, trigger, "inSavePoint")
        }
    }

    func testSavePointInsideTransactionRefusesUntilTheOuterBlockEnds() {
        for trigger in TransactionRollbackTrigger.allCases {
            let outcome = TransactionRollbackTrigger.Outcome()
            var savePointError: Error?
            var afterSavePoint: Int32 = 0
            var thrown: Error?
            XCTAssertThrowsError(
                try db.inTransaction(.immediate) { db in
                    savePointError = db.inSavePoint { _ in trigger.runBlock(on: db, outcome) }
                    // The outer block goes on after the savepoint reported the rollback: still refused.
                    if !db.executeUpdate("insert into t values (4)") { afterSavePoint = db.lastExtendedErrorCode() }
                }
            ) { thrown = $0 }
            XCTAssertEqual((savePointError as? FMDatabaseError)?.transactionWasRolledBack, true, "\(trigger)")
            XCTAssertEqual(afterSavePoint, 516, "\(trigger)")
            assertRolledBack(thrown, outcome, trigger, "inSavePoint inside inTransaction")
        }
    }

    func testABlockThatThrowsGetsItsOwnErrorAndCommitsNothing() {
        struct Gave: Error {}
        for trigger in TransactionRollbackTrigger.allCases {
            XCTAssertThrowsError(
                try db.inTransaction(.deferred) { db in
                    XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                    trigger.run(on: db)
                    XCTAssertThrowsError(try db.executeUpdate("insert into t values (3)", values: nil)) {
                        XCTAssertEqual(($0 as? FMDatabaseError)?.extendedCode, 516)
                        XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_ABORT)
                    }
                    XCTAssertNil(db.executeQuery("select count(*) from t"), "queries are refused too")
                    XCTAssertFalse(db.executeStatements("insert into t values (5)"), "and sqlite3_exec")
                    throw Gave()
                }
            ) { XCTAssertTrue($0 is Gave, "\(trigger)") }
            XCTAssertEqual(committedRows, 0, "\(trigger)")
        }
    }

    func testAnOpenResultSetIsRefusedAfterTheRollback() {
        XCTAssertTrue(db.executeUpdate("insert into u values (2)"))
        var rowsAfter = 0
        var stepError: FMDatabaseError?
        XCTAssertThrowsError(
            try db.inTransaction(.immediate) { db in
                let rs = try db.executeQuery("select a from u", values: nil)
                XCTAssertTrue(rs.next())
                TransactionRollbackTrigger.insertOrRollback.run(on: db)
                do {
                    while try rs.nextWithError() { rowsAfter += 1 }
                } catch {
                    stepError = error as? FMDatabaseError
                }
                rs.close()
            })
        XCTAssertEqual(rowsAfter, 0)
        XCTAssertEqual(stepError?.extendedCode, 516)
        XCTAssertEqual(stepError?.transactionWasRolledBack, true)
    }

    /// SQLite 3.15 (SQLCipher 3.4.1) keeps the transaction open when a statement gets SQLITE_BUSY: the block's
    /// later statements still run inside it, and it commits whole or not at all.
    func testBusyKeepsTheTransactionAndItsLaterStatements() throws {
        let other = FMDatabase(path: databasePath)
        XCTAssertTrue(other.open())
        defer { other.close() }
        db.maxBusyRetryTimeInterval = 0
        XCTAssertTrue(other.beginImmediateTransaction())
        var busyCode: Int32 = 0
        var stillInTransaction = false
        try db.inTransaction(.deferred) { db in
            XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 0)
            if !db.executeUpdate("insert into t values (1)") { busyCode = db.lastErrorCode() }
            stillInTransaction = db.isInTransaction
            XCTAssertTrue(other.rollback(), "the other connection lets go of the write lock")
            XCTAssertTrue(db.executeUpdate("insert into t values (2)"))
            XCTAssertTrue(db.executeUpdate("insert into t values (3)"))
        }
        XCTAssertEqual(busyCode, SQLITE_BUSY)
        XCTAssertTrue(stillInTransaction)
        XCTAssertEqual(committedRows, 2)
    }

    /// A COMMIT of the block's own that gets SQLITE_BUSY (a reader holds the file in rollback journal mode)
    /// leaves the transaction open and committed nothing (SQLite takes its locks before the commit hook runs):
    /// a rollback by SQLite after it is still caught, and the block's later statements are refused rather
    /// than committed one by one.
    func testABlocksOwnCommitThatIsBusyCommitsNothingAndALaterRollbackIsStillCaught() throws {
        XCTAssertEqual(db.string(forQuery: "pragma journal_mode")?.lowercased(), "delete")
        let reader = FMDatabase(path: databasePath)
        XCTAssertTrue(reader.open())
        defer { reader.close() }
        db.maxBusyRetryTimeInterval = 0
        var commitCode: Int32 = 0
        var openAfterCommit = false
        var laterCode: Int32 = 0
        var thrown: Error?
        XCTAssertThrowsError(
            try db.inTransaction(.immediate) { db in
                XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                let rs = try reader.executeQuery("select count(*) from t", values: nil)
                XCTAssertTrue(rs.next(), "the reader holds a shared lock while its statement is open")
                if !db.executeUpdate("commit") { commitCode = db.lastErrorCode() }
                openAfterCommit = db.isInTransaction
                rs.close()
                XCTAssertEqual(TransactionRollbackTrigger.insertOrRollback.run(on: db), SQLITE_CONSTRAINT)
                if !db.executeUpdate("insert into t values (2)") { laterCode = db.lastExtendedErrorCode() }
            }
        ) { thrown = $0 }
        XCTAssertEqual(commitCode, SQLITE_BUSY)
        XCTAssertTrue(openAfterCommit, "a busy COMMIT leaves the transaction open")
        XCTAssertEqual(laterCode, 516, "the statement after SQLite's rollback is refused")
        XCTAssertEqual((thrown as? FMDatabaseError)?.transactionWasRolledBack, true, "\(String(describing: thrown))")
        XCTAssertEqual((thrown as? FMDatabaseError)?.resultCode, SQLITE_CONSTRAINT)
        XCTAssertEqual(committedRows, 0, "nothing of the block is committed")
    }

    /// A statement, or a script (`sqlite3_exec`), that fails after the block's own ROLLBACK ran in autocommit
    /// mode, by the block's choice: it is not taken for a rollback by SQLite, so nothing after it is refused
    /// and the form says the block ended its transaction itself.
    func testAFailureAfterTheBlocksOwnRollbackIsNotTakenForSQLitesRollback() {
        let failures: [(String, (FMDatabase) -> Void)] = [
            (
                "statement",
                { db in XCTAssertEqual(TransactionRollbackTrigger.insertOrRollback.run(on: db), SQLITE_CONSTRAINT) }
            ),
            ("script", { db in XCTAssertFalse(db.executeStatements("select 1; select * from nosuch")) }),
        ]
        for (form, fail) in failures {
            XCTAssertTrue(db.executeUpdate("delete from t"))
            var laterInserted = false
            XCTAssertThrowsError(
                try db.inTransaction(.immediate) { db in
                    XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                    XCTAssertTrue(db.executeUpdate("rollback"))
                    fail(db)
                    laterInserted = db.executeUpdate("insert into t values (3)")
                }
            ) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_MISUSE, "\(form): \(error)")
                XCTAssertEqual((error as? FMDatabaseError)?.transactionWasRolledBack, false, "\(form): \(error)")
            }
            XCTAssertTrue(laterInserted, "\(form): the block's own choice, not refused")
            XCTAssertEqual(committedRows, 1, form)
        }
    }

    /// A block that passes on the refusal of a statement after SQLite's rollback (a `try` that it did not
    /// catch) gets the rollback's error, with its cause's code, not the refusal's 516.
    func testABlockThatPassesOnTheRefusalGetsTheRollbacksCause() {
        for trigger in TransactionRollbackTrigger.allCases {
            XCTAssertThrowsError(
                try db.inTransaction(.immediate) { db in
                    XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                    trigger.run(on: db)
                    try db.executeUpdate("insert into t values (2)", values: nil)
                }
            ) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.transactionWasRolledBack, true, "\(trigger)")
                XCTAssertEqual((error as? FMDatabaseError)?.resultCode, trigger.code, "\(trigger): \(error)")
            }
            XCTAssertEqual(committedRows, 0, "\(trigger)")
        }
    }

    /// A block that ends the transaction itself is told so; what it committed itself is its choice, and a
    /// statement that fails after that is not taken for a rollback by SQLite (nothing is refused, and the
    /// form never says "nothing committed").
    func testABlockThatEndsItsTransactionItselfMakesTheFormFail() {
        for end in ["commit", "rollback"] {
            XCTAssertTrue(db.executeUpdate("delete from t"))
            var laterInserted = false
            XCTAssertThrowsError(
                try db.inTransaction(.immediate) { db in
                    XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                    XCTAssertTrue(db.executeUpdate(end))
                    XCTAssertTrue(db.executeUpdate("insert into t values (2)"))
                    XCTAssertEqual(TransactionRollbackTrigger.insertOrRollback.run(on: db), SQLITE_CONSTRAINT)
                    laterInserted = db.executeUpdate("insert into t values (3)")
                }
            ) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_MISUSE, end)
                XCTAssertEqual((error as? FMDatabaseError)?.transactionWasRolledBack, false, end)
            }
            XCTAssertTrue(laterInserted, "\(end): the block's own choice, not refused")
            XCTAssertEqual(committedRows, end == "commit" ? 3 : 2, end)
        }
        XCTAssertNotNil(db.inSavePoint { _ in XCTAssertTrue(db.executeUpdate("rollback")) })
        // A block that commits and begins again: the form commits nothing of the new transaction.
        XCTAssertTrue(db.executeUpdate("delete from t"))
        XCTAssertThrowsError(
            try db.inTransaction(.immediate) { db in
                XCTAssertTrue(db.executeUpdate("commit"))
                XCTAssertTrue(db.executeUpdate("begin"))
                XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
            })
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(committedRows, 0)
        XCTAssertTrue(db.executeUpdate("insert into t values (2)"), "the connection runs statements afterwards")
    }
}
