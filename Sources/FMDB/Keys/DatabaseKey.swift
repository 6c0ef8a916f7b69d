import Foundation

/// A database key: a passphrase for SQLCipher's own key derivation, or a raw 256-bit key.
///
/// Key bytes live in storage that is wiped with `OPENSSL_cleanse` when the last copy goes.
/// `description` never shows them.
///
/// ```swift
/// let key = DatabaseKey.passphrase("correct horse battery staple")
/// let raw = try DatabaseKey.raw(keyData)          // 32 bytes
/// ```
public struct DatabaseKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    enum Material: Sendable {
        case passphrase(SecureBytes)
        case raw(key: SecureBytes, salt: SecureBytes?)
    }

    let material: Material

    init(material: Material) {
        self.material = material
    }

    /// A passphrase: SQLCipher derives the key itself, as `PRAGMA key = '...'` does.
    public static func passphrase(_ passphrase: String) -> DatabaseKey {
        DatabaseKey(material: .passphrase(SecureBytes(utf8: passphrase)))
    }

    /// A passphrase given as bytes.
    public static func passphrase(data: Data) -> DatabaseKey {
        DatabaseKey(material: .passphrase(SecureBytes(data)))
    }

    /// A raw 32-byte key, optionally with the 16-byte salt SQLCipher should write in a new file.
    /// No key derivation runs at open.
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) when `key` is not 32 bytes or `salt` not 16.
    public static func raw(_ key: Data, salt: Data? = nil) throws -> DatabaseKey {
        guard key.count == 32 else {
            throw FMDatabaseError.misuse("A raw key must be 32 bytes (got \(key.count)).")
        }
        if let salt, salt.count != 16 {
            throw FMDatabaseError.misuse("A raw key's salt must be 16 bytes (got \(salt.count)).")
        }
        return DatabaseKey(material: .raw(key: SecureBytes(key), salt: salt.map(SecureBytes.init)))
    }

    static func raw(secure key: SecureBytes, salt: SecureBytes?) -> DatabaseKey {
        DatabaseKey(material: .raw(key: key, salt: salt))
    }

    /// The bytes handed to `sqlite3_key_v2`: the passphrase itself, or `x'<hex key><hex salt>'`.
    func sqlcipherKeyBytes() -> SecureBytes {
        switch material {
        case .passphrase(let bytes):
            return bytes
        case .raw(let key, let salt):
            return key.sqlcipherHexLiteral(appending: salt)
        }
    }

    /// Throws for an empty passphrase: SQLCipher would silently leave the database unencrypted.
    func validated() throws -> DatabaseKey {
        if case .passphrase(let bytes) = material, bytes.isEmpty {
            throw FMDatabaseError.misuse("An empty key was given: the database would not be encrypted.")
        }
        return self
    }

    /// A description that never shows key bytes.
    public var description: String {
        switch material {
        case .passphrase: return "DatabaseKey.passphrase(<redacted>)"
        case .raw: return "DatabaseKey.raw(<redacted>)"
        }
    }

    /// The same redacted description.
    public var debugDescription: String { description }
}
