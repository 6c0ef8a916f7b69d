import CSQLCipher
import Foundation

/// The on-disk format of an encrypted database: the defaults of the SQLCipher major version that wrote it.
///
/// | format | passphrase KDF | page HMAC | page size |
/// | --- | --- | --- | --- |
/// | `.v4` | PBKDF2-HMAC-SHA512 × 256,000 | HMAC-SHA512 | 4096 |
/// | `.v3` | PBKDF2-HMAC-SHA1 × 64,000 | HMAC-SHA1 | 1024 |
/// | `.v2` | PBKDF2-HMAC-SHA1 × 4,000 | HMAC-SHA1 | 1024 |
/// | `.v1` | PBKDF2-HMAC-SHA1 × 4,000 | none | 1024 |
///
/// The library asks the linked SQLCipher for its version at run time: on SQLCipher 4.x new keyed
/// databases are written in `.v4` and every format opens; on SQLCipher 3.x new databases are `.v3` and
/// `.v4` files cannot be read (a `.v4` file with the right key is then refused with `SQLITE_FORMAT`, 24,
/// not taken for a wrong key).
///
/// ```swift
/// try db.setKey(using: PassphraseKeyProvider("p"))
/// print(db.cipherFormat ?? "plaintext")                       // SQLCipher 3 (a file from an old app)
/// try db.setKey(using: provider, settings: CipherSettings(format: .v3))   // ask for a format
/// ```
///
/// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#cipher_compatibility>
public enum CipherFormat: Int, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    /// SQLCipher 1.x: no page HMAC.
    case v1 = 1
    /// SQLCipher 2.x.
    case v2 = 2
    /// SQLCipher 3.x (Debian 12 and Ubuntu 22.04 ship 3.4.1).
    case v3 = 3
    /// SQLCipher 4.x (Debian 13, Ubuntu 24.04, every FMDB/SQLCipher app on Apple platforms since 2018).
    case v4 = 4

    /// "SQLCipher 4", and so on.
    public var description: String { "SQLCipher \(rawValue)" }

    /// Orders formats by version.
    public static func < (lhs: CipherFormat, rhs: CipherFormat) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The format the linked SQLCipher writes by default: `.v4` on SQLCipher 4.x, `.v3` on 3.x.
    public static var linkedDefault: CipherFormat {
        SQLCipherRuntime.majorVersion >= 4 ? .v4 : .v3
    }

    /// Whether the linked SQLCipher can read and write this format (on 3.x every format but `.v4`).
    public var isSupportedByLinkedSQLCipher: Bool {
        self != .v4 || SQLCipherRuntime.majorVersion >= 4
    }

    /// The iterations of this format's passphrase KDF (PBKDF2).
    public var kdfIterations: Int {
        switch self {
        case .v4: return 256_000
        case .v3: return 64_000
        case .v1, .v2: return 4_000
        }
    }

    /// The HMAC digest of this format's passphrase KDF.
    public var kdfDigest: PBKDF2KeyProvider.Digest { self == .v4 ? .sha512 : .sha1 }

    /// This format's default cipher page size in bytes (`PRAGMA cipher_page_size`): 4096 for `.v4`, 1024
    /// for the older ones.
    var pageSize: Int { self == .v4 ? 4096 : 1024 }

    /// The formats to try, in order, for an existing file whose format is not known: the one `hint`
    /// names (what matched last time for this file), then the linked default, then the older ones.
    static func candidates(hint: CipherFormat?) -> [CipherFormat] {
        var formats: [CipherFormat] = []
        for format in [hint, linkedDefault].compactMap({ $0 }) + allCases.reversed()
        where format.isSupportedByLinkedSQLCipher && !formats.contains(format) {
            formats.append(format)
        }
        return formats
    }

    /// The statements that select this format on a connection keyed just before (and not yet used).
    /// On 4.x: `PRAGMA cipher_compatibility`; on 3.x the settings in which older formats differ.
    func selectionStatements(schema: String? = nil) throws -> [String] {
        let pragma = schema.map { "PRAGMA \($0)." } ?? "PRAGMA "
        if SQLCipherRuntime.majorVersion >= 4 {
            // An attached database gets SQLCipher's defaults, which a program may have changed: say it.
            return self == .v4 && schema == nil ? [] : [pragma + "cipher_compatibility = \(rawValue)"]
        }
        switch self {
        case .v4:
            throw FMDatabaseError(code: SQLITE_FORMAT, message: Self.sqlcipher4Unavailable(action: "write"))
        case .v3:
            return []
        case .v2:
            return [pragma + "kdf_iter = \(kdfIterations)"]
        case .v1:
            return [pragma + "kdf_iter = \(kdfIterations)", pragma + "cipher_use_hmac = OFF"]
        }
    }

    /// The error for the right key to a SQLCipher 4 file on a SQLCipher 3.x library, which cannot read the
    /// format: `SQLITE_FORMAT` (24) with a message saying so (`action`: "open", "attach"), so it is not taken
    /// for a wrong key. Nil on SQLCipher 4.x, when `settings` name a format (the caller asked for that one),
    /// and when page 1 of the file at `path` does not authenticate as SQLCipher 4, with the page size, KDF
    /// iterations and algorithms `settings` give, under the key `provider` gives for `.v4` (a wrong key, a
    /// file of another format or other settings). A passphrase costs SQLCipher 4's KDF: call it
    /// on a failure path only, after no format the linked library reads has matched.
    static func unreadableSQLCipher4Error(
        atPath path: String, salt: Data, provider: any KeyProvider,
        settings: CipherSettings, action: String
    ) -> FMDatabaseError? {
        guard settings.format == nil, !CipherFormat.v4.isSupportedByLinkedSQLCipher,
            SQLCipher4Verifier.isSQLCipher4File(
                atPath: path, salt: salt, settings: settings,
                key: {
                    try provider.key(for: KeyRequest(databasePath: path, salt: salt, format: .v4)).validated()
                })
        else { return nil }
        return FMDatabaseError(code: SQLITE_FORMAT, message: sqlcipher4Unavailable(action: action))
    }

    /// The message for a SQLCipher 4 file on a SQLCipher 3 system.
    static func sqlcipher4Unavailable(action: String) -> String {
        "This is a SQLCipher 4 database (the key is right), and the linked SQLCipher "
            + "\(SQLCipherRuntime.version ?? "3") cannot \(action) SQLCipher 4 files. Install SQLCipher 4 (Debian 12: "
            + "apt-get install -t bookworm-backports libsqlcipher-dev sqlcipher; Debian 13 and Ubuntu 24.04: apt-get "
            + "install libsqlcipher-dev) and rebuild, or convert the file on a SQLCipher 4 system (fmdb-cipher export "
            + "--format 3)."
    }
}

/// The last format that opened each encrypted file in this process, by the file's salt: a queue's or
/// pool's further connections (and any later open of the same file) try it first, so a SQLCipher 3 file on
/// SQLCipher 4 costs one failed try once per process, not once per connection. Only a hint: a file whose
/// format changed still opens through the other candidates.
enum CipherFormatHints {
    private static let formats = Protected([Data: CipherFormat]())

    static func format(forSalt salt: Data) -> CipherFormat? {
        formats.withLock { $0[salt] }
    }

    static func remember(_ format: CipherFormat, forSalt salt: Data) {
        formats.withLock { formats in
            if formats.count >= 4096 { formats.removeAll() }
            formats[salt] = format
        }
    }
}

extension SQLCipherRuntime {
    /// The major version of the linked SQLCipher (3 or 4); 0 when it could not be read.
    static let majorVersion: Int = {
        guard let version, let major = version.split(separator: ".").first.flatMap({ Int($0) }) else { return 0 }
        if major >= 4 { quietenLogging() }
        return major
    }()

    /// SQLCipher's own log, at the level and source it has before anything sets them, on the linked version:
    /// nil where it writes nothing by default (before 4.6 it has no log target until a program names one).
    ///
    /// - 4.6 writes an "ERROR CORE ... hmac check failed" line to standard error for every page it cannot
    ///   authenticate even with its level at its default, NONE (source ANY).
    /// - 4.7 and later raise the level to WARN, and point the log at standard error, when the library starts
    ///   (`sqlcipher_extra_init`) unless a program set them first: the default a program meets is WARN.
    static var defaultLog: (level: String, source: String)? {
        let numbers = (version ?? "").split(separator: " ").first?.split(separator: ".").compactMap { Int($0) } ?? []
        guard numbers.count >= 2 else { return nil }
        let (major, minor) = (numbers[0], numbers[1])
        if major > 4 || (major == 4 && minor >= 7) { return ("WARN", "ANY") }
        if major == 4 && minor == 6 { return ("NONE", "ANY") }
        return nil
    }

    /// SQLCipher 4.6 and later write a line to standard error for every page they cannot authenticate:
    /// every wrong key, and every format tried before the one that matches. The library reports these as
    /// errors (code 26) instead, so, unless the program configured SQLCipher's logging itself (level or
    /// source changed from the linked version's defaults, ``defaultLog``), it turns the log off once per
    /// process, at the first `open()`, with `PRAGMA cipher_log_source = NONE`. SQL text may not change
    /// `cipher_log*` (the keyed-connection authorizer refuses it on every connection); a program that wants
    /// SQLCipher's log sets its level or source through SQLite's C API before its first `open()` (on 4.7 and
    /// later, to anything but WARN with every source, which is what the library start sets), and the library
    /// then leaves it alone.
    private static func quietenLogging() {
        guard let defaults = defaultLog, let connection = Connection.openScratch() else { return }
        defer { try? connection.close() }
        let level = (try? connection.pragmaText("PRAGMA cipher_log_level")) ?? nil
        let source = (try? connection.pragmaText("PRAGMA cipher_log_source")) ?? nil
        if level == defaults.level, source == defaults.source {
            // The library's own statement: the authorizer refuses `cipher_log*` in SQL text on every
            // connection, this one included, and silently did so here (SQLCipherLogTests).
            connection.runningLibraryStatements {
                _ = try? connection.execute("PRAGMA cipher_log_source = NONE")
            }
        }
    }
}
