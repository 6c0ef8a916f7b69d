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
/// - on a **keyed** connection (one keyed through this library, or with a keyed attached schema): every
///   key PRAGMA (`key`, `rekey`, `hexkey`, `hexrekey`, `textkey`, `textrekey`), `cipher_migrate` (which acts
///   without a value), and every cipher PRAGMA, `kdf_iter`, `fast_kdf_iter`, `page_size`, `temp_store` and
///   `temp_store_directory` when it **sets** a value, are refused with SQLITE_AUTH; reading one (no value)
///   stays allowed. `ATTACH` of a file and `sqlcipher_export` from SQL text are refused (`ATTACH ''`, an
///   in-memory temporary database that VACUUM uses, is not): use
///   `attachDatabase(atPath:schema:keyProvider:settings:)` and `exportContents(to:)`, which say in code
///   whether the other file is encrypted.
/// - a connection keyed by SQL text (`PRAGMA key = '…'` or another key PRAGMA with a value, let through on
///   an unkeyed connection) is keyed from then on: the rules above apply to the statements after it, so
///   cipher settings go through `CipherSettings`, not SQL.
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
    static func refusal(pragma rawName: String, hasValue: Bool, keyed: Bool) -> String? {
        let name = rawName.lowercased()
        if hasValue, name.hasPrefix("cipher_default_") || processWidePragmas.contains(name) {
            return "PRAGMA \(name) is refused: it changes a process-wide SQLCipher setting, which would weaken or expose every "
                + "later encrypted connection of this process. Use CipherSettings (or fmdb-cipher's options) for one database."
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
        guard hasValue else { return nil }
        if name == "temp_store" || name == "temp_store_directory" {
            return "PRAGMA \(name) is refused on an encrypted database: temporary tables and sort files must stay in memory "
                + "(temp_store = MEMORY), never on disk in plaintext."
        }
        if name == "page_size" {
            return "PRAGMA page_size is refused on an encrypted database: SQLCipher 3.4.1 would write pages it cannot read back. "
                + "Use CipherSettings(pageSize:) when keying a new database, or fmdb-cipher export --new-page-size."
        }
        if settingPragmas.contains(name) || name.hasPrefix("cipher_") {
            return "PRAGMA \(name) = … is refused on an encrypted database: changing cipher settings on a keyed connection "
                + "can make the file unreadable. Use CipherSettings with setKey(using:settings:) or attachDatabase, "
                + "or fmdb-cipher export to convert a database."
        }
        return nil
    }

    static let attachRefusal = "ATTACH is refused on an encrypted database: an attached file could receive a plaintext copy "
        + "(ATTACH … KEY '' then sqlcipher_export or INSERT … SELECT). Use attachDatabase(atPath:schema:keyProvider:), which "
        + "says in code whether the attached file is encrypted."

    static let keyRequiredRefusal = "No statement runs on this connection: setKey(using:) failed on a new database, and "
        + "anything written now would be written without encryption. Key it again (setKey(using:)), or close it."

    static let exportRefusal = "sqlcipher_export is refused in SQL text on an encrypted database: it can write a plaintext copy. "
        + "Use exportContents(to:) after attachDatabase(atPath:schema:keyProvider:), or fmdb-cipher export / decrypt."
}

/// The authorizer's state for one connection: whether it is keyed, whether the library's own statements
/// are running, and the last refusal (read back into the error by `Connection`).
///
/// Not Sendable: touched by the connection's thread only (the authorizer runs inside `sqlite3_prepare*`).
final class AuthorizerState {
    /// Set when the connection (or an attached schema) is keyed through this library.
    var isKeyed = false
    /// Set when `setKey(using:)` failed on a new (missing or empty) file: until the connection is keyed,
    /// SQL text may run nothing but a key PRAGMA, so a program that goes on after the error cannot write
    /// the database in plaintext.
    var requiresKey = false
    /// Nesting depth of `Connection.runningLibraryStatements`.
    fileprivate var libraryDepth = 0
    private var refusal: String?

    func refuse(_ message: String) { refusal = message }

    func takeRefusal() -> String? {
        defer { refusal = nil }
        return refusal
    }

    /// The authorizer's verdict for one action (SQLITE_OK or SQLITE_DENY). `first`/`second` are the
    /// action's two text arguments (https://www.sqlite.org/c3ref/c_alter_table.html).
    fileprivate func decide(action: Int32, first: UnsafePointer<CChar>?, second: UnsafePointer<CChar>?) -> Int32 {
        if requiresKey, libraryDepth == 0 {
            if action == SQLITE_PRAGMA, second != nil, let first,
               KeyedAuthorizerPolicy.keyPragmas.contains(String(cString: first).lowercased()) {
                isKeyed = true
                requiresKey = false
                return SQLITE_OK
            }
            refuse(KeyedAuthorizerPolicy.keyRequiredRefusal)
            return SQLITE_DENY
        }
        let message: String?
        switch action {
        case SQLITE_PRAGMA:
            guard let first else { return SQLITE_OK }
            let name = String(cString: first)
            message = KeyedAuthorizerPolicy.refusal(pragma: name, hasValue: second != nil, keyed: isKeyed)
            // SQL text that keys the connection itself (`PRAGMA key = '…'`, as FMDB code ported from Apple
            // platforms may do) makes it a keyed connection from here on: the cipher may then no longer be
            // weakened by the statements that follow (`PRAGMA kdf_iter = 1`, `cipher_use_hmac = OFF`).
            if message == nil, !isKeyed, second != nil, KeyedAuthorizerPolicy.keyPragmas.contains(name.lowercased()) {
                isKeyed = true
                requiresKey = false
            }
        case SQLITE_ATTACH:
            // `ATTACH ''` is a temporary database, held in memory under temp_store = MEMORY: VACUUM attaches
            // one itself. Every named file is refused.
            if let first, first.pointee == 0 { return SQLITE_OK }
            message = isKeyed ? KeyedAuthorizerPolicy.attachRefusal : nil
        case SQLITE_FUNCTION:
            guard isKeyed, let second, strcasecmp(second, "sqlcipher_export") == 0 else { return SQLITE_OK }
            message = KeyedAuthorizerPolicy.exportRefusal
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
        let state = Unmanaged.passUnretained(authorizerState).toOpaque()
        sqlite3_set_authorizer(db, { context, action, first, second, _, _ in
            guard let context else { return SQLITE_OK }
            let state = Unmanaged<AuthorizerState>.fromOpaque(context).takeUnretainedValue()
            guard state.requiresKey || action == SQLITE_PRAGMA || action == SQLITE_ATTACH || action == SQLITE_FUNCTION else {
                return SQLITE_OK
            }
            return state.decide(action: action, first: first, second: second)
        }, state)
    }

    /// Marks the connection keyed: from now on SQL text may not change its key or cipher (see
    /// `KeyedAuthorizerPolicy`).
    func markKeyed() {
        authorizerState.isKeyed = true
        authorizerState.requiresKey = false
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
            return FMDatabaseError(code: SQLITE_AUTH, message: refusal, sql: sql)
        }
        guard let db = handle else { return .closed(sql: sql) }
        return FMDatabaseError(code: sqlite3_extended_errcode(db), message: message, sql: sql)
    }

    /// Runs the library's own statements (cipher settings, attach, export): the authorizer lets them through.
    func runningLibraryStatements<T>(_ body: () throws -> T) rethrows -> T {
        authorizerState.libraryDepth += 1
        defer { authorizerState.libraryDepth -= 1 }
        return try body()
    }
}
