import FMDB
import Foundation

/// A statement after which SQLite itself rolls back the whole open transaction, for the tests of the rule
/// "a transaction the library began is never half-committed", in every transaction form.
///
/// A test creates the schema (``schema``) once, then, inside the form's block on the form's connection:
/// `insert into t values (1)` (succeeds), ``run(on:)`` (fails, and SQLite ends the transaction), `insert into
/// t values (3)` through the FMDB Bool form, its result not looked at. Nothing of it may be committed.
///
/// ```swift
/// let trigger = TransactionRollbackTrigger.insertOrRollback
/// XCTAssertTrue(db.executeStatements(TransactionRollbackTrigger.schema))
/// let outcome = TransactionRollbackTrigger.Outcome()
/// XCTAssertThrowsError(try db.inTransaction { db in trigger.runBlock(on: db, outcome) })
/// ```
public enum TransactionRollbackTrigger: String, CaseIterable, Sendable {
    /// `INSERT OR ROLLBACK` meeting a UNIQUE constraint.
    case insertOrRollback
    /// A column's `UNIQUE ON CONFLICT ROLLBACK` constraint.
    case onConflictRollback
    /// A trigger's `RAISE(ROLLBACK, ...)`.
    case raiseRollback
    /// `SQLITE_FULL` from SQLite's page limit (`PRAGMA max_page_count`): a real "database or disk is full".
    case full
    /// `SQLITE_INTERRUPT`: `sqlite3_interrupt` on the connection while the statement runs (from a function
    /// the statement calls).
    case interrupt

    /// The tables and the trigger every case uses: `t` (what the blocks write), `u`, `c`, `r`.
    public static let schema = """
        create table t (a);
        create table u (a integer unique);
        insert into u values (1);
        create table c (a integer unique on conflict rollback);
        insert into c values (1);
        create table r (a);
        create trigger r_refuses before insert on r begin select raise(rollback, 'r refuses every row'); end;
        """

    /// The primary result code the statement fails with.
    public var code: Int32 {
        switch self {
        case .insertOrRollback, .onConflictRollback, .raiseRollback: SQLITE_CONSTRAINT
        case .full: SQLITE_FULL
        case .interrupt: SQLITE_INTERRUPT
        }
    }

    /// Runs the statement on `db` inside an open transaction; returns its primary result code (0: it did not
    /// fail).
    @discardableResult
    public func run(on db: FMDatabase) -> Int32 {
        let sql: String
        switch self {
        case .insertOrRollback:
            sql = "insert or rollback into u values (1)"
        case .onConflictRollback:
            sql = "insert into c values (1)"
        case .raiseRollback:
            sql = "insert into r values (1)"
        case .full:
            // No page beyond those the file has now: a row that needs more fails with SQLITE_FULL.
            let pages = db.int(forQuery: "pragma page_count")
            guard db.executeStatements("pragma max_page_count = \(pages)") else { return -1 }
            sql = "insert into t values (zeroblob(100000))"
        case .interrupt:
            db.makeFunctionNamed("interrupt_here", arguments: 0) { [weak db] context, _, _ in
                db?.interrupt()
                db?.resultInt(0, context: context)
            }
            sql = """
                insert into t select interrupt_here() from
                (with recursive n(x) as (select 1 union all select x + 1 from n limit 10000) select x from n)
                """
        }
        return db.executeUpdate(sql) ? 0 : db.lastErrorCode()
    }

    /// What a block saw: the trigger's code, and the extended code of the statement it ran afterwards.
    public final class Outcome: @unchecked Sendable {
        // @unchecked Sendable: written by the block, read by the test after the form returned.
        /// The primary code the trigger's statement failed with.
        public var triggerCode: Int32 = 0
        /// The extended code of the block's statement after the trigger (0: it succeeded).
        public var laterCode: Int32 = 0
        /// Whether that statement's error says the transaction was rolled back.
        public var laterSaysRolledBack = false
        /// Whether a transaction was open after the trigger's statement failed.
        public var inTransactionAfterTrigger = true

        public init() {}
    }

    /// The block every form runs: a row, the trigger, a later row whose result is not looked at (as a
    /// careless FMDB block does), recorded in `outcome`.
    public func runBlock(on db: FMDatabase, _ outcome: Outcome) {
        db.logsErrors = false
        guard db.executeUpdate("insert into t values (1)") else { return }
        outcome.triggerCode = run(on: db)
        outcome.inTransactionAfterTrigger = db.isInTransaction
        if !db.executeUpdate("insert into t values (3)") {
            outcome.laterCode = db.lastExtendedErrorCode()
            outcome.laterSaysRolledBack = (db.lastError() as? FMDatabaseError)?.transactionWasRolledBack ?? false
        }
    }
}
