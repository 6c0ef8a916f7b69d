import Foundation

/// What a `KeyProvider` is asked for: the key of one database file.
///
/// ```swift
/// struct EnvironmentKeyProvider: KeyProvider {
///     func key(for request: KeyRequest) throws -> DatabaseKey {
///         guard let value = ProcessInfo.processInfo.environment["APP_DB_KEY"] else { throw MyError.noKey }
///         return .passphrase(value)
///     }
/// }
/// ```
public struct KeyRequest: Sendable {
    /// The database's path; nil for an in-memory database.
    public let databasePath: String?
    /// The 16-byte salt at the start of an existing encrypted file; nil for a new, empty or plaintext file.
    public let salt: Data?
    /// The file format the key is asked for. It matters only to providers that derive what SQLCipher's
    /// own `PRAGMA key` would (`PBKDF2KeyProvider.sqlcipherCompatible`): an existing file of unknown format
    /// is tried in the linked SQLCipher's default format first, then in older ones (see `CipherFormat`).
    public let format: CipherFormat

    /// A request for the key of the database at `databasePath` (nil: in-memory) with the file's `salt`,
    /// in `format` (by default the linked SQLCipher's: `.v4` on SQLCipher 4.x, `.v3` on 3.x).
    public init(databasePath: String?, salt: Data?, format: CipherFormat = .linkedDefault) {
        self.databasePath = databasePath
        self.salt = salt
        self.format = format
    }
}
