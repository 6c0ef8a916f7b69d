import Foundation

/// The one error type of the library: an `NSError` with domain `"FMDatabase"`, `code` = SQLite's
/// primary result code and `localizedDescription` = SQLite's message (or the library's own, for misuse).
///
/// Every error the library throws, and every error `FMDatabase.lastError()` returns, is an
/// `FMDatabaseError`.
///
/// ```swift
/// do {
///     try db.executeUpdate("INSERT INTO missing VALUES (?)", values: [1])
/// } catch let error as NSError {
///     print(error.domain, error.code, error.localizedDescription)   // FMDatabase 1 no such table: missing
/// }
/// ```
///
/// Descriptions never contain bound values or key bytes; they may contain SQL text. The library's own SQL
/// never contains a key (keys reach SQLCipher through `sqlite3_key_v2`); SQL a program wrote with a key
/// in it (a key PRAGMA, an `ATTACH ... KEY`, in any spelling SQLite accepts) is replaced, with SQLite's
/// message about it, by "(SQL that may hold a key, not shown)".
///
/// Related SQLite documentation: <https://www.sqlite.org/rescode.html>
///
/// - Note: FMDB compatibility: FMDB returns `NSError`s; so does this library, as a subclass, because
///   on Linux `catch let error as NSError` only matches real `NSError` instances (a Swift error
///   that merely conforms to `CustomNSError` bridges with `as NSError` but not with `as?`), and FMDB
///   code written for Apple platforms relies on that pattern.
public final class FMDatabaseError: NSError, @unchecked Sendable {
    // @unchecked Sendable: every stored property is an immutable value, as in NSError itself.

    /// The errors' domain, "FMDatabase".
    public static let domain = "FMDatabase"

    /// The extended result code, e.g. 1555 for `SQLITE_CONSTRAINT_PRIMARYKEY`.
    public let extendedCode: Int32
    /// SQLite's message, or the library's own for misuse.
    public let message: String
    /// The SQL that failed, when there is one.
    public let sql: String?

    /// The primary result code as SQLite spells it (`Int32`), e.g. `SQLITE_NOTADB`.
    public var resultCode: Int32 { Int32(truncatingIfNeeded: code) }

    /// True on the error a rekey throws when, afterwards, which key opens the file could not be checked
    /// (an I/O error, a disk that stays full, a lock held throughout): the file opens with the old key or
    /// the new one — never both, never neither because of the rekey. The code is the cause's
    /// (`SQLITE_IOERR`, `SQLITE_FULL`, `SQLITE_BUSY`, ...). The connection is left closed; try each key once
    /// the cause is fixed.
    public var rekeyOutcomeUnchecked: Bool { marked(.rekeyOutcomeUnchecked) }

    /// True when a key slot file's structure or tag is bad (code `SQLITE_CORRUPT`): the file is damaged or
    /// was altered. A secret that no slot accepts is `SQLITE_NOTADB` instead.
    public var isDamagedKeySlotFile: Bool { marked(.damagedKeySlotFile) }

    /// True when an unlock refused to try the slots of a key slot file one after another because their key
    /// derivations together exceed the work one unlock may spend (code `SQLITE_PERM`): none was tried. A file
    /// planted beside a database to make every open slow looks like this; a real one opens by naming the slot
    /// (`KeySlotKeyProvider(secret:slotID:)`). The budget is the work of one scrypt slot of N=2^22, r=8, p=1:
    /// every single slot, and every file of up to 64 slots at the library's default KDFs, is within it.
    public var exceedsKeySlotWorkBudget: Bool { marked(.keySlotWorkBudgetExceeded) }

    /// The key slot file an error of a slot unlock is about, for messages that name it: set when no slot
    /// of the file accepts the secret (code `SQLITE_NOTADB`) or when ``exceedsKeySlotWorkBudget`` is true;
    /// nil on every other error.
    ///
    /// ```swift
    /// do {
    ///     try db.setKey(using: KeySlotKeyProvider(secret: .passphrase(typed)))
    /// } catch let error as FMDatabaseError where error.keySlotFile != nil {
    ///     print("no key slot in \(error.keySlotFile ?? "") accepts this passphrase")
    /// }
    /// ```
    public var keySlotFile: String? { userInfo[Self.keySlotFileKey] as? String }

    private static let keySlotFileKey = "keySlotFile"

    /// True when SQLite rolled back the transaction of a transaction block (`inTransaction`, `inSavePoint`,
    /// a queue's or pool's transaction forms, a migration) after one of its statements failed, the form's
    /// own COMMIT included: nothing of the block was committed. Set on the error the block's form reports at
    /// its end (its code is the failed statement's: `SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_INTERRUPT`,
    /// `SQLITE_CONSTRAINT`, ...) and on the error of every statement the block ran afterwards, which was
    /// refused (code 516, `SQLITE_ABORT_ROLLBACK`).
    ///
    /// ```swift
    /// do {
    ///     try queue.inTransaction(.immediate) { db in try importRows(db) }
    /// } catch let error as FMDatabaseError where error.transactionWasRolledBack {
    ///     print("nothing was imported: \(error.message)")
    /// }
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
    public var transactionWasRolledBack: Bool { marked(.transactionRolledBack) }

    /// What an error says beyond its code, recorded in `userInfo` under its raw value.
    enum Mark: String {
        case rekeyOutcomeUnchecked
        case damagedKeySlotFile
        case keySlotWorkBudgetExceeded
        case transactionRolledBack
        case connectionReplaced
    }

    func marked(_ mark: Mark) -> Bool { userInfo[mark.rawValue] as? Bool ?? false }

    /// Creates an error from a (primary or extended) result code and a message.
    public convenience init(code: Int32, message: String? = nil, sql: String? = nil) {
        self.init(code: code, message: message, sql: sql, marks: [])
    }

    /// `details`: more `userInfo` entries, each read back by the feature that wrote it (`copyFailure`).
    /// `messageNamesNoSQL`: `message` is the library's own and never quotes the SQL (the key guard's
    /// refusals); otherwise a message about SQL that may hold a key (`loggable`) is not shown.
    init(
        code: Int32, message: String?, sql: String? = nil, marks: [Mark], details: [String: String] = [:],
        keySlotFile: String? = nil, messageNamesNoSQL: Bool = false
    ) {
        let loggableSQL = sql.map(FMDatabaseError.loggable)
        // SQL that may hold a key is not shown, and neither is a message about it: SQLite's own messages quote
        // the SQL near an error ("unrecognized token: "'passphrase"), and so may a message written here.
        let hidesKey = !messageNamesNoSQL && sql != nil && loggableSQL != sql
        let text =
            hidesKey
            ? FMDatabaseError.defaultMessage(for: code) + " (the SQL may hold a key: its message is not shown)"
            : message ?? FMDatabaseError.defaultMessage(for: code)
        self.extendedCode = code
        self.message = text
        let sql = loggableSQL
        self.sql = sql
        var info: [String: Any] = [NSLocalizedDescriptionKey: text, "extendedCode": Int(code)]
        if let sql { info["sql"] = sql }
        for mark in marks { info[mark.rawValue] = true }
        for (key, value) in details { info[key] = value }
        if let keySlotFile { info[Self.keySlotFileKey] = keySlotFile }
        super.init(domain: FMDatabaseError.domain, code: Int(code & 0xFF), userInfo: info)
    }

    /// This error with `note` appended to its message; its codes, SQL, marks and details kept.
    func appending(_ note: String) -> FMDatabaseError {
        var marks: [Mark] = []
        var details: [String: String] = [:]
        for (key, value) in userInfo {
            if let mark = Mark(rawValue: key) {
                if value as? Bool == true { marks.append(mark) }
            } else if ![NSLocalizedDescriptionKey, "extendedCode", "sql", Self.keySlotFileKey].contains(key),
                let text = value as? String
            {
                details[key] = text
            }
        }
        // `message` and `sql` are already what may be shown.
        return FMDatabaseError(
            code: extendedCode, message: message + note, sql: sql, marks: marks, details: details,
            keySlotFile: keySlotFile, messageNamesNoSQL: true)
    }

    /// Not supported: these errors are not archived.
    public required init?(coder: NSCoder) {
        nil
    }

    /// SQLite's own English text for a result code.
    static func defaultMessage(for code: Int32) -> String {
        SQLiteLibrary.message(for: code)
    }

    /// "SQLite error CODE: message", with the SQL when there is one (never bound values or keys).
    public override var description: String {
        var text = "SQLite error \(code): \(message)"
        if let sql { text += " - while executing `\(sql)`" }
        return text
    }

    // MARK: - Library errors

    /// The key guard refused `sql`: SQLITE_AUTH with the guard's reason, which names no part of the SQL and
    /// is shown even when the SQL may hold a key (the SQL itself is not).
    static func refused(_ reason: String, sql: String?) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_AUTH, message: reason, sql: sql, marks: [], messageNamesNoSQL: true)
    }

    /// A statement refused because SQLite rolled back the transaction of the block it runs in after `cause`
    /// (see Core/Connection+TransactionForms.swift).
    static func refusedOnAbortedTransaction(cause: FMDatabaseError, sql: String?) -> FMDatabaseError {
        FMDatabaseError(
            code: FMDB.refusedOnAbortedTransaction,
            message: "current transaction is aborted, statements are refused until the end of the transaction block:"
                + " SQLite rolled the transaction back after an earlier statement failed (\(cause.describedAsCause))",
            sql: sql, marks: [.transactionRolledBack], messageNamesNoSQL: true)
    }

    /// What a transaction block's form reports when SQLite rolled back its transaction after `cause`: the
    /// cause's code, so code that matches it (`SQLITE_FULL`, `SQLITE_INTERRUPT`) still does.
    static func transactionRolledBack(cause: FMDatabaseError) -> FMDatabaseError {
        FMDatabaseError(
            code: cause.extendedCode,
            message: "the transaction was rolled back: SQLite ended it when a statement failed"
                + " (\(cause.describedAsCause)); nothing of the transaction block was committed",
            sql: cause.sql, marks: [.transactionRolledBack], messageNamesNoSQL: true)
    }

    /// "SQLite error CODE: message", for a message that quotes this error as its cause (the SQL, which may
    /// hold a key, is not quoted; the message already hides one).
    private var describedAsCause: String { "SQLite error \(extendedCode): \(message)" }

    /// A transaction block ended the transaction its form began itself: its own COMMIT, END, ROLLBACK or
    /// RELEASE, or it closed the database.
    static func transactionEndedByBlock() -> FMDatabaseError {
        misuse(
            "the transaction block ended its transaction itself (its own COMMIT, END, ROLLBACK or RELEASE, or it"
                + " closed the database): what it ran after that was not part of the transaction")
    }

    static func misuse(_ message: String, sql: String? = nil) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISUSE, message: message, sql: sql)
    }

    /// SQL text holding a NUL byte at byte `offset` of its UTF-8: SQLite reads SQL text only up to the first
    /// NUL, so what follows would be skipped without a word. SQLITE_MISUSE, before any of the text runs. The
    /// SQL kept in the error shows the NUL as `\0`, and at most its first `shownSQLCharacters` characters
    /// (a script can be megabytes). SQL that may hold a key is hidden before the NUL is spelled out (`\0key`
    /// would no longer read as the key word), reading a NUL as the white space it stands between.
    static func nulInSQL(at offset: Int, sql: String) -> FMDatabaseError {
        let hidden = loggable(sql.replacingOccurrences(of: "\0", with: " "))
        var shown = hidden == sql.replacingOccurrences(of: "\0", with: " ") ? sql : hidden
        shown = shown.replacingOccurrences(of: "\0", with: "\\0")
        if shown.count > shownSQLCharacters { shown = String(shown.prefix(shownSQLCharacters)) + "…" }
        return FMDatabaseError(
            code: SQLITE_MISUSE,
            message:
                "The SQL text holds a NUL byte (at byte \(offset)): SQLite would stop reading there and skip "
                + "everything after it. Remove it (binary data goes in a bound parameter).",
            sql: shown, marks: [], messageNamesNoSQL: true)
    }

    /// How much of the SQL text an error about a NUL byte keeps.
    static let shownSQLCharacters = 1000

    static func closed(sql: String? = nil) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISUSE, message: "The FMDatabase is not open.", sql: sql)
    }

    static func bindCount(expected: Int32, got: Int, sql: String) -> FMDatabaseError {
        FMDatabaseError(
            code: SQLITE_RANGE,
            message: "Error: the bind count (\(got)) is not correct for the # of variables in the query (\(expected))",
            sql: sql
        )
    }
}

extension FMDatabaseError {
    /// `sql` as it may appear in an error, a log line or a trace: SQL that may hold a key is replaced by a
    /// placeholder, whole (the library itself never puts a key in SQL; a program porting FMDB code may).
    /// Which SQL that is follows SQLite's grammar, not spellings (`SQLRedaction`): text with a statement
    /// that is a key PRAGMA (any schema, quoting, comments and value form), an `ATTACH` with a `KEY` clause
    /// (any value form) or a file that is not one plain literal, or a statement SQLite cannot tokenize that
    /// spells `key`. Other SQL is shown as it is, a column named `key` included.
    static func loggable(_ sql: String) -> String {
        SQLRedaction.mayHoldKey(sql) ? "(SQL that may hold a key, not shown)" : sql
    }
}
