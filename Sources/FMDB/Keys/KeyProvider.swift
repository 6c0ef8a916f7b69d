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

/// A source of database keys. `FMDatabase.setKey(using:)`, and the keyed `FMDatabaseQueue` and
/// `FMDatabasePool`, ask it for the key of every connection they open.
///
/// Providers must be safe to call from any thread (`Sendable`).
public protocol KeyProvider: Sendable {
    /// The key for the database described by `request`.
    /// - Throws: any error; it is passed on to the caller that opened the database.
    func key(for request: KeyRequest) throws -> DatabaseKey

    /// Reads the provider's source again (a key file, a systemd credential, a slot file), so the next
    /// ``key(for:)`` answers with the key the database is under now.
    ///
    /// A keyed `FMDatabaseQueue` or `FMDatabasePool` calls it when a connection that worked meets the
    /// file under a key it does not hold (`SQLITE_NOTADB`: the database was rekeyed elsewhere), before it
    /// opens the next connection. The default does nothing: a provider that holds a fixed key has nothing
    /// to read again. Wrap one that reads a source in ``ReloadableKeyProvider``.
    ///
    /// ```swift
    /// let provider = try ReloadableKeyProvider { try RawKeyProvider(key: Data(contentsOf: keyFileURL)) }
    /// ```
    /// - Throws: when the source cannot be read; the provider then keeps what it had.
    func reloadKey() throws
}

extension KeyProvider {
    /// Default: nothing to read again (see ``KeyProvider/reloadKey()``).
    public func reloadKey() throws {}
}

/// A passphrase, handed to SQLCipher, which runs its own key derivation on every connection (the
/// file format's: PBKDF2-HMAC-SHA512 × 256,000 for SQLCipher 4, PBKDF2-HMAC-SHA1 × 64,000 for
/// SQLCipher 3): the same as `PRAGMA key = 'passphrase'`.
///
/// ```swift
/// let queue = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("correct horse"))
/// ```
public struct PassphraseKeyProvider: KeyProvider {
    private let key: DatabaseKey

    /// A provider for `passphrase` (UTF-8), handed to SQLCipher's own KDF.
    public init(_ passphrase: String) {
        key = .passphrase(passphrase)
    }

    /// A provider for a passphrase given as bytes.
    public init(data: Data) {
        key = .passphrase(data: data)
    }

    init(key: DatabaseKey) {
        self.key = key
    }

    /// The key for `request` (see `KeyProvider`).
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for an empty passphrase or settings below the floor.
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        try key.validated()
    }
}

/// A 32-byte raw key: no key derivation at open. Every new file gets a fresh random salt from SQLCipher.
///
/// ```swift
/// let provider = try RawKeyProvider(key: keyFromKeychain)   // 32 bytes
/// ```
public struct RawKeyProvider: KeyProvider {
    private let key: DatabaseKey

    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) unless `key` is exactly 32 bytes.
    public init(key: Data) throws {
        self.key = try .raw(key)
    }

    init(key: DatabaseKey) {
        self.key = key
    }

    /// The key for `request` (see `KeyProvider`).
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for an empty passphrase or settings below the floor.
    public func key(for request: KeyRequest) throws -> DatabaseKey { key }
}
