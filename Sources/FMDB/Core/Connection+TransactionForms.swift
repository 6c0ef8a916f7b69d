import CSQLCipher

/// The code of a statement refused because SQLite rolled back the transaction it would run in:
/// `SQLITE_ABORT_ROLLBACK` (`SQLITE_ABORT | (2 << 8)`), "an SQL statement aborted because the transaction
/// that was active when the SQL statement first started was rolled back" (https://www.sqlite.org/rescode.html).
/// `sqlite3_step` never returns it here (extended result codes are off), so a step that does was refused
/// by `Connection.step(_:)`.
let refusedOnAbortedTransaction: Int32 = SQLITE_ABORT | (2 << 8)

/// A transaction the library began is never half-committed.
///
/// SQLite may end a transaction on its own when a statement fails: "If certain kinds of errors occur on a
/// statement within a multi-statement transaction (errors including SQLITE_FULL, SQLITE_IOERR,
/// SQLITE_NOMEM, SQLITE_BUSY, and SQLITE_INTERRUPT) then the transaction might be rolled back
/// automatically" (https://www.sqlite.org/c3ref/get_autocommit.html), and so does a `ROLLBACK` conflict
/// resolution (`INSERT OR ROLLBACK`, `ON CONFLICT ROLLBACK`, a trigger's `RAISE(ROLLBACK, ...)`). The
/// connection is then in autocommit mode: a block that went on would commit each later statement at once.
///
/// The library's transaction forms (`FMDatabase.inTransaction`, its FMDB block shape behind the queue's and
/// pool's transactions, `inSavePoint`) count themselves open here once their BEGIN or SAVEPOINT succeeded.
/// When a statement that started inside the transaction fails and leaves the connection in autocommit mode,
/// the transaction is marked aborted: from then on every statement on the connection is refused before it
/// reaches SQLite (`refusedOnAbortedTransaction`) until the outermost form ends, and each form reports the
/// rollback instead of committing. Outside a form a statement costs one flag check; inside one, one more
/// call (is a transaction open?) before it steps.
///
/// A block may also end the form's transaction itself (its own COMMIT, ROLLBACK, END or RELEASE): then its
/// later statements run in autocommit, by its choice, and one of them failing is no rollback by SQLite. The
/// commit hook tells the two apart: it notes any commit while a form is open, and a transaction in which
/// something was committed is never reported as "nothing committed" (its form reports SQLITE_MISUSE).
/// SQLite takes the locks a COMMIT needs before it calls the hook, so a COMMIT that gets SQLITE_BUSY (and
/// leaves the transaction open) is never noted (tested). A statement that starts with no transaction open
/// (the block ended it) is never taken for a rollback.
extension Connection {
    /// One step of `stmt`, a statement of this connection: refused while the transaction is aborted.
    @inline(__always)
    func step(_ stmt: OpaquePointer) -> Int32 {
        if isTransactionAborted { return refusedOnAbortedTransaction }
        if transactionFormDepth > 0 { return stepInTransactionForm(stmt) }
        return sqlite3_step(stmt)
    }

    /// One step of `stmt` while a transaction form is open: marks the transaction aborted when a statement
    /// that started inside it failed and SQLite ended it.
    @inline(never)
    private func stepInTransactionForm(_ stmt: OpaquePointer) -> Int32 {
        let startedInTransaction = handle.map { sqlite3_get_autocommit($0) == 0 } ?? false
        let committedBefore = committedDuringForm
        let rc = sqlite3_step(stmt)
        if rc != SQLITE_ROW, rc != SQLITE_DONE {
            // The commit hook runs before SQLite writes the commit: a statement that failed after it (the
            // block's own COMMIT meeting an I/O error or a full disk) committed nothing.
            if !committedBefore { committedDuringForm = false }
            if startedInTransaction { noteFailedStatement(rc, sql: sqlite3_sql(stmt).map { String(cString: $0) }) }
        }
        return rc
    }

    /// A statement failed while a form is open: when SQLite has ended the transaction, marks it aborted.
    @inline(never)
    func noteFailedStatement(_ rc: Int32, sql: String?) {
        guard let db = handle, !isTransactionAborted, !committedDuringForm, sqlite3_get_autocommit(db) != 0 else {
            return
        }
        let current = sqlite3_extended_errcode(db)
        let sameCode = (current & 0xFF) == (rc & 0xFF)
        abortTransaction(
            cause: FMDatabaseError(
                code: sameCode ? current : rc, message: sameCode ? String(cString: sqlite3_errmsg(db)) : nil, sql: sql
            ))
    }

    /// Throws the refusal while the transaction is aborted: the check every statement passes before
    /// `sqlite3_prepare` and `sqlite3_exec`.
    @inline(__always)
    func refuseIfTransactionAborted(sql: String?) throws {
        if isTransactionAborted, let cause = transactionAbortCause {
            throw FMDatabaseError.refusedOnAbortedTransaction(cause: cause, sql: sql)
        }
    }

    /// Installs the commit hook that sets `committedDuringForm` (at open, on every connection). It runs at each
    /// commit, not at each statement. A program that sets its own hook through `sqliteHandle` replaces it:
    /// the refusal after a rollback by SQLite still holds, and only a block that commits by itself and then
    /// fails is reported as rolled back.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/commit_hook.html>
    func installCommitHook() {
        guard let db = handle else { return }
        sqlite3_commit_hook(
            db,
            { context in
                guard let context else { return 0 }
                let connection = Unmanaged<Connection>.fromOpaque(context).takeUnretainedValue()
                if connection.transactionFormDepth > 0 { connection.committedDuringForm = true }
                return 0  // 0: the commit goes ahead.
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A form's BEGIN or SAVEPOINT succeeded.
    func transactionFormDidBegin() {
        transactionFormDepth += 1
    }

    /// A form ended (whatever happened to its transaction): the outermost one clears the aborted state, so
    /// the connection runs statements again.
    func transactionFormDidEnd() {
        transactionFormDepth = max(0, transactionFormDepth - 1)
        if transactionFormDepth == 0 { clearTransactionAbort() }
    }
}
