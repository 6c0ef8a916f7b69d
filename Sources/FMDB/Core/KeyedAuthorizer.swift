import CSQLCipher
import Foundation

// MARK: - The one guard between SQL text and the key

/// What SQL text may do to a connection's key and cipher settings.
///
/// SQLCipher takes its key and cipher settings as PRAGMAs, so any SQL a program runs (a statement typed
/// into `fmdb-cipher sql`, an injected one, a migration script) could otherwise change or drop the key:
/// `PRAGMA key = 'other'` re-keys a used connection and corrupts the file at the next write, `PRAGMA rekey`
/// under another connection's lock mixes pages under two keys (SQLCipher 3.4.1), `PRAGMA cipher_use_hmac =
/// OFF` followed by a write leaves a file no key opens, `PRAGMA temp_store = FILE` sends temporary tables to
/// disk in plaintext, `ATTACH 'plain.db' AS p KEY ''` plus `sqlcipher_export('p')` (or an `INSERT … SELECT`)
/// writes a plaintext copy.
///
/// The policy, enforced by an authorizer (`sqlite3_set_authorizer`) that sees every statement when it is
/// compiled, whatever API runs it (`executeUpdate`, `executeStatements`, `executeQuery`, the C API on
/// `sqliteHandle`):
/// - on a **keyed** connection: one held to the keyed rules (`AuthorizerState.heldToKeyedRules`, which the
///   authorizer reads since it cannot ask SQLCipher while a statement compiles), set once SQLCipher said a
///   schema has a codec after the library keyed it (`setKey`, `attachDatabase` with a key provider) or after
///   SQL text it saw keyed one (a key PRAGMA, `ATTACH … KEY`), and held from such a PRAGMA until it is
///   settled (`sqlKeyPending`); a key set by calling `sqlite3_key`/`sqlite3_key_v2` on `sqliteHandle` does not
///   count here, though `Connection.isKeyed` sees it. On such a connection every
///   key PRAGMA (`key`, `rekey`, `hexkey`, `hexrekey`, `textkey`, `textrekey`), `cipher_migrate` (which acts
///   without a value), and every cipher PRAGMA, `kdf_iter`, `fast_kdf_iter`, `page_size`, `temp_store` and
///   `temp_store_directory` when it **sets** a value, are refused with SQLITE_AUTH; reading one (no value)
///   stays allowed, and so does `temp_store = MEMORY`, which a keyed connection has already. `ATTACH` of a
///   file and `sqlcipher_export` from SQL text are refused (`ATTACH ''`, an in-memory temporary database that
///   VACUUM uses, is not): use `attachDatabase(atPath:schema:keyProvider:settings:)` and
///   `exportContents(to:)`, which say in code whether the other file is encrypted.
/// - a key PRAGMA in SQL text (`PRAGMA key = '…'` or another key PRAGMA with a value) is let through on an
///   unkeyed connection only with a key SQLCipher would use: an empty value, or a `hexkey`/`hexrekey` value
///   that is not whole bytes of hexadecimal digits, is refused (SQLCipher 3.4.1 would attach no codec and
///   go on in plaintext), and so is one while other statements are prepared on the connection (they were
///   checked as for an unencrypted one). From that statement on the connection is held to the keyed rules,
///   but it *counts* as keyed only once SQLCipher says a codec is attached (`PRAGMA cipher_provider` answers
///   only then), checked before the next statement the library prepares or runs
///   (`Connection.settlePendingSQLKey`): then it gets what a connection keyed through the API gets
///   (`temp_store = MEMORY`), and a failed-key lockout (below) ends; if no codec is attached, a lockout
///   stays. When main has no codec, each attached schema is asked (`PRAGMA a.key` keys `a`): a keyed one
///   holds the connection to the keyed rules with `temp_store = MEMORY`, and a lockout stays. A key PRAGMA
///   run through the C API on `sqliteHandle` is checked at the library's next statement in the same way. A
///   call of `sqlite3_key`/`sqlite3_key_v2` on `sqliteHandle` is not: no statement passes the authorizer, so
///   the connection stays under the unkeyed rules (not guarded: the DocC article "Security guards, their tests
///   and figures").
/// - an `ATTACH … KEY 'k'` in SQL text on an unkeyed connection keys the attached schema (SQLCipher): after it
///   ran, each attached schema is asked the same question, and a keyed one holds the connection to the keyed
///   rules with `temp_store = MEMORY`, as `attachDatabase` with a key provider does.
/// - until a key PRAGMA or an `ATTACH` in SQL text is settled (the rest of its `sqlite3_exec` script, or a
///   statement run before the library's next one), whatever it keyed is not known: a PRAGMA that sets what
///   the keyed rules refuse (other than a key PRAGMA) and a temporary table, index, view or trigger are
///   refused, so `ATTACH 'e.db' AS e KEY 'k'; PRAGMA e.kdf_iter = 1` cannot weaken `e` and `PRAGMA key = 'k';
///   CREATE TEMP TABLE …` cannot reach disk before `temp_store = MEMORY`. A statement from the statement
///   cache settles first, as a freshly prepared one does.
/// - when a connection becomes keyed, every statement prepared on it before is expired
///   (`sqlite3_set_authorizer` again), so SQLite compiles it again, through the keyed rules, before it
///   next runs: an `ATTACH` of a plaintext file prepared before the key cannot run after it.
/// - on **every** connection: setting a process-wide SQLCipher default (`cipher_default_*`, `cipher_log*`,
///   `cipher_profile`, `cipher_memory_security`) is refused, because it changes how every later keyed
///   connection of the process writes its files (a `cipher_default_kdf_iter = 1` would bypass the KDF
///   floor of every passphrase-keyed file created afterwards).
///
/// The library's own statements (keying, `CipherSettings`, attach, export) run inside
/// `Connection.runningLibraryStatements`, which the authorizer lets through.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/set_authorizer.html>
enum KeyedAuthorizerPolicy {
    /// PRAGMAs that name a key: refused on a keyed connection with or without a value (SQLCipher 3.4.1 and
    /// 4.x; `textkey`/`textrekey` are SQLite SEE's spellings, which newer SQLite versions route to the codec).
    static let keyPragmas: [String] = ["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]

    /// PRAGMAs that change the file without taking a value: refused on a keyed connection in both forms.
    static let actingPragmas: [String] = ["cipher_migrate"]

    /// PRAGMAs that change the key derivation, the cipher, the page layout or where temporary data goes:
    /// refused on a keyed connection when they set a value. Every other `cipher_…` name is treated the
    /// same way (the prefix rule in `refusal`), so a PRAGMA a later SQLCipher adds is refused by default.
    static let settingPragmas: [String] = [
        "kdf_iter", "fast_kdf_iter", "rekey_kdf_iter", "cipher", "rekey_cipher", "page_size",
        "temp_store", "temp_store_directory", "activate_extensions",
    ]

    /// Process-wide SQLCipher settings: refused on every connection when they set a value.
    static let processWidePragmas: [String] = [
        "cipher_log", "cipher_log_level", "cipher_log_source", "cipher_profile", "cipher_memory_security",
        "cipher_trace", "cipher_hmac_salt_mask",
    ]

    /// Why SQL text may not run `PRAGMA name [= value]` on this connection, or nil when it may.
    static func refusal(pragma rawName: String, value: UnsafePointer<CChar>?, keyed: Bool) -> String? {
        let name = rawName.lowercased()
        let hasValue = value != nil
        if hasValue, name.hasPrefix("cipher_default_") || processWidePragmas.contains(name) {
            return
                "PRAGMA \(name) is refused: it changes a process-wide SQLCipher setting, which would weaken or expose "
                + "every later encrypted connection of this process. Use CipherSettings (or fmdb-cipher's options) for "
                + "one database."
        }
        guard keyed else { return nil }
        if keyPragmas.contains(name) {
            return "PRAGMA \(name) is refused on an encrypted database: SQL text may not set or change the key. "
                + "Use setKey(using:) to key a connection and rekey(using:) (or fmdb-cipher rekey) to change the key."
        }
        if actingPragmas.contains(name) {
            return "PRAGMA \(name) is refused on an encrypted database: it rewrites the file's encryption. "
                + "Use fmdb-cipher export to convert a database."
        }
        guard let value else { return nil }
        // Keeping temporary data in memory is what a keyed connection has already: asking for it is allowed.
        if name == "temp_store", strcasecmp(value, "memory") == 0 || strcmp(value, "2") == 0 { return nil }
        if name == "temp_store" || name == "temp_store_directory" {
            return
                "PRAGMA \(name) is refused on an encrypted database: temporary tables and sort files must stay in "
                + "memory (temp_store = MEMORY), never on disk in plaintext."
        }
        if name == "page_size" {
            return
                "PRAGMA page_size is refused on an encrypted database: SQLCipher 3.4.1 would write pages it cannot "
                + "read back. Use CipherSettings(pageSize:) when keying a new database, or fmdb-cipher export "
                + "--new-cipher-page-size."
        }
        if settingPragmas.contains(name) || name.hasPrefix("cipher_") {
            return
                "PRAGMA \(name) = … is refused on an encrypted database: changing cipher settings on a keyed "
                + "connection can make the file unreadable. Use CipherSettings with setKey(using:settings:) or "
                + "attachDatabase, or fmdb-cipher export to convert a database."
        }
        return nil
    }

    static let attachRefusal =
        "ATTACH is refused on an encrypted database: an attached file could receive a plaintext copy "
        + "(ATTACH … KEY '' then sqlcipher_export or INSERT … SELECT). Use "
        + "attachDatabase(atPath:schema:keyProvider:), which says in code whether the attached file is encrypted."

    static let keyRequiredRefusal =
        "No statement runs on this connection: setKey(using:) failed on a new database, and "
        + "anything written now would be written without encryption. Key it again (setKey(using:)), or close it."

    static let emptyKeyRefusal =
        "PRAGMA key with an empty value is refused: SQLCipher would not encrypt the database. "
        + "Give a key of one or more characters, or use setKey(using:)."

    static let keyAfterStatementsRefusal =
        "PRAGMA key is refused: other statements are prepared on this connection, and "
        + "they were checked as for an unencrypted database (an ATTACH of a plaintext file would run under the key). "
        + "Key the connection right after open(), before any other statement, or use setKey(using:)."

    static let keyInTransactionRefusal =
        "PRAGMA key is refused inside a transaction: temporary data could not be kept "
        + "in memory. Key the connection right after open(), or use setKey(using:)."

    static let badHexKeyRefusal =
        "PRAGMA hexkey is refused: its value must be whole bytes of hexadecimal digits "
        + "(SQLCipher would not encrypt the database with anything else). Use setKey(using:) with a RawKeyProvider."

    /// Why SQL text may not key with `value` through the key PRAGMA `name` (lower case), or nil when it may.
    /// Only what makes SQLCipher attach no codec is refused here; whether one was attached is asked of
    /// SQLCipher afterwards (`Connection.settlePendingSQLKey`).
    static func keyValueRefusal(pragma name: String, value: UnsafePointer<CChar>) -> String? {
        if value.pointee == 0 { return emptyKeyRefusal }
        guard name == "hexkey" || name == "hexrekey" else { return nil }
        var length = 0
        var cursor = value
        while cursor.pointee != 0 {
            guard isxdigit(Int32(UInt8(bitPattern: cursor.pointee))) != 0 else { return badHexKeyRefusal }
            length += 1
            cursor += 1
        }
        return length % 2 == 0 ? nil : badHexKeyRefusal
    }

    /// Why SQL text may not run `PRAGMA name = …` (a setting the keyed rules refuse) right after a key PRAGMA
    /// or an `ATTACH` that is not settled yet.
    static func unsettledRefusal(_ name: String) -> String {
        "PRAGMA \(name) is refused right after a key PRAGMA or an ATTACH in the same statements: whether they "
            + "keyed a database is not known yet, and this could weaken its cipher or put temporary data on disk. "
            + "Run it in a separate call."
    }

    static let unsettledTempRefusal =
        "A temporary table, index, view or trigger is refused right after a key PRAGMA or an ATTACH in the same "
        + "statements: whether they keyed a database (which keeps temporary data in memory) is not known yet. "
        + "Run it in a separate call."

    static let exportRefusal =
        "sqlcipher_export is refused in SQL text on an encrypted database: it can write a plaintext copy. "
        + "Use exportContents(to:) after attachDatabase(atPath:schema:keyProvider:), or fmdb-cipher export / decrypt."
}

extension KeyedAuthorizerPolicy {
    /// PRAGMAs that change the database or its files without taking a value.
    /// PRAGMAs whose argument names what to read (`table_info(t)`, `integrity_check(10)`): allowed with it.
    static let readingPragmasWithArgument: Set<String> = [
        "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list", "foreign_key_list",
        "foreign_key_check", "integrity_check", "quick_check", "cipher_integrity_check",
    ]

    static let actingWithoutValuePragmas: Set<String> = [
        "wal_checkpoint", "optimize", "incremental_vacuum", "cipher_migrate", "integrity_check_repair",
    ]

    /// Why SQL text may not run `action` on a query-only connection (`FMDatabase.makeQueryOnly()`), or nil
    /// when it may: every PRAGMA that sets a value (`journal_mode = WAL` rewrites the file's header, which
    /// `PRAGMA query_only` alone lets through; `query_only = OFF` would undo it) or acts without one
    /// (`wal_checkpoint`, `optimize`, `incremental_vacuum`), `ATTACH`/`DETACH` (and so `VACUUM`, which
    /// attaches), and every statement that changes a schema (`CREATE`, `DROP`, `ALTER`, `REINDEX`,
    /// `ANALYZE`), temporary ones included.
    ///
    /// Row writes (`INSERT`, `UPDATE`, `DELETE`) are not judged here, by action: a virtual-table module
    /// (FTS3/4/5, R-tree) compiles statements of its own while a query that reads it is compiled, and the
    /// authorizer sees their actions as the query's: R-tree prepares the INSERT and DELETE of its shadow
    /// tables up front, and connecting one reports an UPDATE of `sqlite_master`, though reading runs
    /// neither. A row write is refused by what the statement itself does instead: the library refuses a
    /// statement it prepares that is not read-only (`sqlite3_stmt_readonly`) after a row-write action
    /// (`rowWriteRefusal`), and `PRAGMA query_only` stops any write that runs (SQLITE_READONLY, reported
    /// with the same message).
    static func queryOnlyRefusal(action: Int32, first: UnsafePointer<CChar>?, second: UnsafePointer<CChar>?)
        -> String?
    {
        let what: String
        switch action {
        case SQLITE_PRAGMA:
            guard let first else { return nil }
            let name = String(cString: first).lowercased()
            if second != nil, readingPragmasWithArgument.contains(name) { return nil }
            guard second != nil || actingWithoutValuePragmas.contains(name) else { return nil }
            what = second != nil ? "PRAGMA \(name) = …" : "PRAGMA \(name)"
        case SQLITE_ATTACH, SQLITE_DETACH: what = "ATTACH, DETACH and VACUUM"
        case SQLITE_CREATE_INDEX, SQLITE_CREATE_TABLE, SQLITE_CREATE_TEMP_INDEX, SQLITE_CREATE_TEMP_TABLE,
            SQLITE_CREATE_TEMP_TRIGGER, SQLITE_CREATE_TEMP_VIEW, SQLITE_CREATE_TRIGGER, SQLITE_CREATE_VIEW,
            SQLITE_CREATE_VTABLE, SQLITE_DROP_INDEX, SQLITE_DROP_TABLE, SQLITE_DROP_TEMP_INDEX,
            SQLITE_DROP_TEMP_TABLE, SQLITE_DROP_TEMP_TRIGGER, SQLITE_DROP_TEMP_VIEW, SQLITE_DROP_TRIGGER,
            SQLITE_DROP_VIEW, SQLITE_DROP_VTABLE, SQLITE_ALTER_TABLE, SQLITE_REINDEX, SQLITE_ANALYZE:
            what = "a statement that changes the schema"
        default: return nil
        }
        return "\(what) is refused: this connection answers queries only"
    }

    /// The refusal of a statement that writes rows on a query-only connection.
    static let rowWriteRefusal = "a statement that writes is refused: this connection answers queries only"

    /// Whether `action` writes rows (the actions `queryOnlyRefusal` leaves to the statement's own check).
    static func writesRows(_ action: Int32) -> Bool {
        action == SQLITE_INSERT || action == SQLITE_UPDATE || action == SQLITE_DELETE
    }
}

/// The authorizer's state for one connection: whether it is keyed, whether the library's own statements
/// are running, and the last refusal (read back into the error by `Connection`).
///
/// Not Sendable: touched by the connection's thread only (the authorizer runs inside `sqlite3_prepare*`).
final class AuthorizerState {
    /// Set once SQLCipher said a schema of the connection has a codec (`Connection.adoptKey`, after the library
    /// keyed it, or `Connection.settlePendingSQLKey`, after a key PRAGMA in SQL text): the authorizer's copy of
    /// that answer, since it cannot ask while a statement compiles. Every other rule asks `Connection.isKeyed`.
    var heldToKeyedRules = false
    /// Set when SQL text ran a key PRAGMA with a value on an unkeyed connection: held to the keyed rules,
    /// but keyed only once SQLCipher says so (`Connection.settlePendingSQLKey`).
    var sqlKeyPending = false
    /// Set when SQL text attached a file while the connection was unkeyed (that file has no key): keying later
    /// must not let it receive copies in plaintext. Cleared when no such schema is left.
    var attachedWhileUnkeyed = false
    /// Set when SQL text attached a file while the connection was unkeyed: with `ATTACH … KEY 'k'` SQLCipher
    /// keys that schema, asked after the statement ran (`Connection.settlePendingSQLKey`).
    var sqlAttachPending = false
    /// Set when `setKey(using:)` failed on a new (missing or empty) file: until main is keyed (an attached
    /// schema keyed does not count), SQL text may run nothing but a key PRAGMA, so a program that goes on
    /// after the error cannot write the database in plaintext.
    var requiresKey = false
    /// Set by `makeQueryOnly`: SQL text may only read (`KeyedAuthorizerPolicy.queryOnlyRefusal`).
    var isQueryOnly = false
    /// The connection's copy of `Connection.isTransactionAborted`: while SQLite has rolled back a library
    /// form's transaction, every statement compiled outside the library is refused here too, so that the
    /// later statements of an `sqlite3_exec` script (which prepares and steps them itself) or a statement
    /// prepared through `sqliteHandle` never run in autocommit.
    var transactionAborted = false
    /// Set when SQL text compiled on a query-only connection reported a row write (its own, or one of a
    /// virtual-table module's statements); cleared before each statement the library prepares.
    var sawRowWrite = false
    /// The connection's handle, for the list of its prepared statements (read only).
    fileprivate var handle: OpaquePointer?
    /// Nesting depth of `Connection.runningLibraryStatements`.
    fileprivate var libraryDepth = 0
    private var refusal: String?

    func refuse(_ message: String) { refusal = message }

    func takeRefusal() -> String? {
        defer { refusal = nil }
        return refusal
    }

    /// Why SQL text may not key the connection with the key PRAGMA `name` (lower case) and `value` now, or nil.
    /// Besides the value (`keyValueRefusal`): no other statement may be prepared on the connection, since
    /// those were checked as for an unencrypted one (the statement being compiled is on the list too).
    private func sqlKeyRefusal(pragma name: String, value: UnsafePointer<CChar>) -> String? {
        if let refusal = KeyedAuthorizerPolicy.keyValueRefusal(pragma: name, value: value) { return refusal }
        if let db = handle, sqlite3_get_autocommit(db) == 0 { return KeyedAuthorizerPolicy.keyInTransactionRefusal }
        if let db = handle, let first = sqlite3_next_stmt(db, nil), sqlite3_next_stmt(db, first) != nil {
            return KeyedAuthorizerPolicy.keyAfterStatementsRefusal
        }
        return nil
    }

    /// The authorizer's verdict for one action (SQLITE_OK or SQLITE_DENY). `first`/`second` are the
    /// action's two text arguments (https://www.sqlite.org/c3ref/c_alter_table.html).
    fileprivate func decide(action: Int32, first: UnsafePointer<CChar>?, second: UnsafePointer<CChar>?) -> Int32 {
        if transactionAborted, libraryDepth == 0 { return SQLITE_DENY }
        // Held to the keyed rules from the key PRAGMA on, before SQLCipher was asked whether it keyed.
        let keyedRules = heldToKeyedRules || sqlKeyPending
        if requiresKey, libraryDepth == 0 {
            // Until the connection is keyed, SQL text may run one thing: a key PRAGMA with a usable value. It
            // ends the lockout only when SQLCipher then says it keyed (settlePendingSQLKey), never here.
            if action == SQLITE_PRAGMA, !sqlKeyPending, let second, let first,
                case let name = String(cString: first).lowercased(), KeyedAuthorizerPolicy.keyPragmas.contains(name)
            {
                if let refusal = sqlKeyRefusal(pragma: name, value: second) {
                    refuse(refusal)
                    return SQLITE_DENY
                }
                sqlKeyPending = true
                return SQLITE_OK
            }
            refuse(KeyedAuthorizerPolicy.keyRequiredRefusal)
            return SQLITE_DENY
        }
        if isQueryOnly, libraryDepth == 0, KeyedAuthorizerPolicy.writesRows(action) { sawRowWrite = true }
        if isQueryOnly, libraryDepth == 0,
            let refusal = KeyedAuthorizerPolicy.queryOnlyRefusal(action: action, first: first, second: second)
        {
            refuse(refusal)
            return SQLITE_DENY
        }
        // A key PRAGMA or an ATTACH not settled yet (later statements of the same script, a cached statement
        // run before the settle): whatever it keyed is not known, so nothing may weaken a cipher or put
        // temporary data on disk until it is.
        let settlePending = sqlKeyPending || sqlAttachPending
        let message: String?
        switch action {
        case SQLITE_PRAGMA:
            guard let first else { return SQLITE_OK }
            let name = String(cString: first)
            var refusal = KeyedAuthorizerPolicy.refusal(pragma: name, value: second, keyed: keyedRules)
            if refusal == nil, settlePending, libraryDepth == 0,
                !KeyedAuthorizerPolicy.keyPragmas.contains(name.lowercased()),
                KeyedAuthorizerPolicy.refusal(pragma: name, value: second, keyed: true) != nil
            {
                refusal = KeyedAuthorizerPolicy.unsettledRefusal(name.lowercased())
            }
            // SQL text that keys the connection itself (`PRAGMA key = '…'`, as FMDB code ported from Apple
            // platforms may do) holds it to the keyed rules from here on: the cipher may then no longer be
            // weakened by the statements that follow (`PRAGMA kdf_iter = 1`, `cipher_use_hmac = OFF`).
            // Whether it keyed is asked of SQLCipher before the library's next statement.
            if refusal == nil, !keyedRules, let second, case let lowered = name.lowercased(),
                KeyedAuthorizerPolicy.keyPragmas.contains(lowered)
            {
                if libraryDepth == 0 {
                    refusal = sqlKeyRefusal(pragma: lowered, value: second)
                    if refusal == nil { sqlKeyPending = true }
                }
            }
            message = refusal
        case SQLITE_ATTACH:
            // `ATTACH ''` is a temporary database, held in memory under temp_store = MEMORY: VACUUM attaches
            // one itself. Every named file is refused.
            if let first, first.pointee == 0 { return SQLITE_OK }
            message = keyedRules ? KeyedAuthorizerPolicy.attachRefusal : nil
            if message == nil, libraryDepth == 0 {
                attachedWhileUnkeyed = true
                sqlAttachPending = true
            }
        case SQLITE_FUNCTION:
            guard keyedRules, let second, strcasecmp(second, "sqlcipher_export") == 0 else { return SQLITE_OK }
            message = KeyedAuthorizerPolicy.exportRefusal
        case SQLITE_CREATE_TEMP_TABLE, SQLITE_CREATE_TEMP_INDEX, SQLITE_CREATE_TEMP_TRIGGER, SQLITE_CREATE_TEMP_VIEW:
            message = settlePending ? KeyedAuthorizerPolicy.unsettledTempRefusal : nil
        default:
            return SQLITE_OK
        }
        guard let message, libraryDepth == 0 else { return SQLITE_OK }
        refuse(message)
        return SQLITE_DENY
    }
}

extension Connection {
    /// Installs the authorizer (at open, on every connection). It stays cheap: only PRAGMA, ATTACH and
    /// FUNCTION actions are looked at.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/set_authorizer.html>
    func installAuthorizer() {
        guard let db = handle else { return }
        authorizerState.handle = db
        let state = Unmanaged.passUnretained(authorizerState).toOpaque()
        sqlite3_set_authorizer(
            db,
            { context, action, first, second, _, _ in
                guard let context else { return SQLITE_OK }
                let state = Unmanaged<AuthorizerState>.fromOpaque(context).takeUnretainedValue()
                guard
                    state.requiresKey || state.isQueryOnly || action == SQLITE_PRAGMA || action == SQLITE_ATTACH
                        || action == SQLITE_FUNCTION || state.sqlKeyPending || state.sqlAttachPending
                        || state.transactionAborted
                else {
                    return SQLITE_OK
                }
                return state.decide(action: action, first: first, second: second)
            }, state)
    }

    /// Marks the connection keyed: from now on SQL text may not change its key or cipher (see
    /// `KeyedAuthorizerPolicy`). Statements prepared before are expired, so each is compiled again, through
    /// the keyed rules, before it next runs (`sqlite3_set_authorizer` expires every prepared statement).
    /// A failed-key lockout ends only when `schema` is main: keying an attached database leaves main as
    /// unencrypted as it was, and a write to it would still be plaintext.
    private func markKeyed(schema: String) {
        let wasKeyed = authorizerState.heldToKeyedRules
        authorizerState.heldToKeyedRules = true
        if schema.lowercased() == "main" {
            authorizerState.requiresKey = false
            authorizerState.sqlKeyPending = false
        }
        if !wasKeyed { installAuthorizer() }
    }

    /// After a key PRAGMA in SQL text: asks SQLCipher whether the main schema now has a codec (only then
    /// does `PRAGMA cipher_provider` answer) and, when it has, keys the connection as `setKey(_:)` does
    /// (`markKeyed`, `temp_store = MEMORY`). When it has not, each attached schema is asked the same (`PRAGMA
    /// a.key` keys schema `a`), and a keyed one holds the connection to the keyed rules; a failed-key lockout
    /// stays in force until main is keyed. After an `ATTACH` in SQL text on an unkeyed connection, asks the
    /// same of each attached schema (`ATTACH … KEY 'k'` keys it): a keyed one holds the connection to the
    /// keyed rules, as `attachDatabase` with a key provider does. Called before every statement the library
    /// prepares or runs (one from the statement cache too), and after `sqlite3_exec`; it costs two flag tests
    /// when neither ran.
    ///
    /// Not earlier than that: SQLCipher keys while it compiles the PRAGMA, and expiring the PRAGMA's own
    /// statement before it ran would compile it again under the keyed rules, which refuse it. (An ATTACH
    /// prepared and held, to be stepped after another statement was prepared, is asked about too early: its
    /// schema is not attached yet.)
    @inline(__always)
    func settlePendingSQLKey() throws {
        guard authorizerState.sqlKeyPending || authorizerState.sqlAttachPending else { return }
        if authorizerState.sqlKeyPending { try settleSQLKey() }
        if authorizerState.sqlAttachPending { try settleSQLAttach() }
    }

    private func settleSQLAttach() throws {
        authorizerState.sqlAttachPending = false
        guard !authorizerState.heldToKeyedRules else { return }
        do {
            for name in try foreignSchemas() where try hasCodec(schema: name) {
                try adoptKey(schema: name)
                return
            }
        } catch {
            authorizerState.sqlAttachPending = true
            throw error
        }
    }

    private func settleSQLKey() throws {
        // Cleared while asking (the questions are statements of their own); set again whenever the answer is
        // not complete, so the keyed rules (and a failed-key lockout) keep holding.
        authorizerState.sqlKeyPending = false
        do {
            guard try hasCodec(schema: "main") else {
                // `PRAGMA a.key = '…'` keys an attached schema: it holds the connection to the keyed rules,
                // as `attachDatabase` with a key provider does (a failed-key lockout stays: main is not keyed).
                guard !authorizerState.heldToKeyedRules else { return }
                for name in try foreignSchemas() where try hasCodec(schema: name) {
                    try adoptKey(schema: name)
                    return
                }
                return
            }
            // Databases attached before the key were attached without one: they would take plaintext copies.
            try detachForeignSchemas()
            try keepTemporaryDataInMemory()
        } catch {
            authorizerState.sqlKeyPending = true
            throw error
        }
        markKeyed(schema: "main")
    }

    /// Whether `schema` of this connection is keyed: the one answer every rule that depends on it uses
    /// (backups, the cipher format, keying again, rekeys, the keyed rules of SQL text), however the schema was
    /// keyed (`setKey`, a key PRAGMA in SQL text or through the C API, `ATTACH … KEY`). A key PRAGMA still to be
    /// settled is settled first.
    ///
    /// The answer is SQLCipher's: whether a codec is attached to the schema's pager, never whether a key API was
    /// called (SQLCipher 3.4.1 keys nothing for some values, and SQL text can key a connection the API never saw).
    func isKeyed(schema: String = "main") throws -> Bool {
        try settlePendingSQLKey()
        return try hasCodec(schema: schema)
    }

    /// After the library keyed `schema` (`sqlite3_key_v2`, `ATTACH … KEY`): checks with SQLCipher that a codec
    /// is attached, then holds SQL text to the keyed rules (`markKeyed`) and keeps temporary data in memory.
    /// Throws SQLITE_MISUSE when SQLCipher keyed nothing, so no caller goes on as if the schema were encrypted.
    func adoptKey(schema: String = "main") throws {
        guard try hasCodec(schema: schema) else {
            throw FMDatabaseError.misuse(
                "SQLCipher did not key the database '\(schema)': it would be written in plaintext.")
        }
        markKeyed(schema: schema)
        try keepTemporaryDataInMemory()
    }

    /// SQLCipher's answer for `schema`: `PRAGMA schema.cipher_provider` answers only when a codec is attached
    /// to that schema (SQLCipher 3.4.1 and 4.x, `sqlcipher_codec_pragma`: the provider comes from the schema's
    /// codec context, and there is none without a key). It reads no page, so it is safe before a key is known
    /// to be right.
    private func hasCodec(schema: String) throws -> Bool {
        let name = schema.replacingOccurrences(of: "\"", with: "\"\"")
        return try runningLibraryStatements { try pragmaText("PRAGMA \"\(name)\".cipher_provider") } != nil
    }

    /// `temp_store = MEMORY`, checked by reading it back: temporary tables and sort files of a keyed
    /// connection must never go to disk, where they would be plaintext.
    func keepTemporaryDataInMemory() throws {
        try runningLibraryStatements {
            try execute("PRAGMA temp_store = MEMORY")
            guard try pragmaText("PRAGMA temp_store") == "2" else {
                throw FMDatabaseError(
                    code: SQLITE_ERROR, message: "temp_store could not be set to MEMORY on a keyed connection.")
            }
        }
    }

    /// The schemas other than main and temp (`PRAGMA database_list`).
    private func foreignSchemas() throws -> [String] {
        try runningLibraryStatements {
            let statement = try prepare("PRAGMA database_list")
            defer { statement.finalize() }
            var names: [String] = []
            while statement.step() == SQLITE_ROW {
                if let name = statement.string(at: 1), name != "main", name != "temp" { names.append(name) }
            }
            return names
        }
    }

    /// Throws SQLITE_MISUSE with `message` when SQL text attached a file to this unkeyed connection and it may
    /// still be attached. (Asked without reading the file: an encrypted main database cannot be read yet.)
    func refuseForeignSchemas(_ message: String) throws {
        if authorizerState.attachedWhileUnkeyed { throw FMDatabaseError.misuse(message) }
    }

    /// After SQL text keyed the connection: detaches every schema attached before (without a key), and says so.
    private func detachForeignSchemas() throws {
        guard authorizerState.attachedWhileUnkeyed else { return }
        let names = try foreignSchemas()
        authorizerState.attachedWhileUnkeyed = false
        guard !names.isEmpty else { return }
        try runningLibraryStatements {
            for name in names {
                try execute("DETACH DATABASE \"\(name.replacingOccurrences(of: "\"", with: "\"\""))\"")
            }
        }
        throw FMDatabaseError(
            code: SQLITE_AUTH,
            message:
                "PRAGMA key keyed a connection that had databases attached without a key "
                + "(\(names.joined(separator: ", "))): they were detached, so nothing is copied into them in "
                + "plaintext. Key the connection before attaching."
        )
    }

    /// After a failed `setKey(using:)` on a new file: SQL text runs nothing but a key PRAGMA until the
    /// connection is keyed (see `AuthorizerState.requiresKey`).
    func requireKey() {
        authorizerState.requiresKey = true
    }

    /// Whether `requireKey()` is in force.
    var keyIsRequired: Bool { authorizerState.requiresKey }

    /// The error of a failed `sqlite3_exec`: SQLITE_AUTH with the authorizer's reason when it refused a
    /// statement (SQLite reports a refused function as SQLITE_ERROR), SQLite's own error otherwise.
    func execError(message: String?, sql: String) -> FMDatabaseError {
        if let refusal = authorizerState.takeRefusal() {
            return FMDatabaseError.refused(refusal, sql: sql)
        }
        guard let db = handle else { return .closed(sql: sql) }
        if let refusal = queryOnlyWriteRefusal(sqlite3_extended_errcode(db)) {
            return FMDatabaseError.refused(refusal, sql: sql)
        }
        return FMDatabaseError(code: sqlite3_extended_errcode(db), message: message, sql: sql)
    }

    /// The query-only refusal for a write `PRAGMA query_only` stopped (the extended code `SQLITE_READONLY`
    /// itself on a query-only connection), or nil. Its extended forms (a hot journal a read-only connection
    /// cannot roll back, `SQLITE_READONLY_ROLLBACK`, ...) are not writes of the statement: SQLite's error stays.
    func queryOnlyWriteRefusal(_ extendedCode: Int32) -> String? {
        authorizerState.isQueryOnly && extendedCode == SQLITE_READONLY ? KeyedAuthorizerPolicy.rowWriteRefusal : nil
    }

    /// Refuses (SQLITE_AUTH) a statement just prepared on a query-only connection that writes rows: it
    /// reported a row-write action and is not read-only. A query whose virtual-table module compiled
    /// writes of its own (`queryOnlyRefusal`) is read-only and passes. Finalizes `stmt` when refused.
    func refuseRowWrite(_ stmt: OpaquePointer, sql: String?) throws {
        guard authorizerState.isQueryOnly, authorizerState.sawRowWrite, sqlite3_stmt_readonly(stmt) == 0 else {
            return
        }
        sqlite3_finalize(stmt)
        throw FMDatabaseError.refused(KeyedAuthorizerPolicy.rowWriteRefusal, sql: sql)
    }

    /// Runs the library's own statements (cipher settings, attach, export): the authorizer lets them through.
    func runningLibraryStatements<T>(_ body: () throws -> T) rethrows -> T {
        authorizerState.libraryDepth += 1
        defer { authorizerState.libraryDepth -= 1 }
        return try body()
    }
}

extension Connection {
    /// Holds SQL text on this connection to reading, for good (`FMDatabase.makeQueryOnly()`): `PRAGMA
    /// query_only = ON` (read back) and the authorizer's query-only rules. Statements prepared before are
    /// expired, so each is compiled again under those rules before it next runs.
    func makeQueryOnly() throws {
        try runningLibraryStatements {
            try execute("PRAGMA query_only = ON")
            guard try pragmaText("PRAGMA query_only") == "1" else {
                throw FMDatabaseError(code: SQLITE_ERROR, message: "PRAGMA query_only did not take")
            }
        }
        authorizerState.isQueryOnly = true
        installAuthorizer()
    }
}
