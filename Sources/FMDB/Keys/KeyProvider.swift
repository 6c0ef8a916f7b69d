import Foundation

/// A source of database keys. `FMDatabase.setKey(using:)`, and the keyed `FMDatabaseQueue` and
/// `FMDatabasePool`, ask it for the key of every connection they open.
///
/// Providers must be safe to call from any thread (`Sendable`).
public protocol KeyProvider: Sendable {
    /// The key for the database described by `request`.
    /// - Throws: any error; it is passed on to the caller that opened the database.
    func key(for request: KeyRequest) throws -> DatabaseKey

    /// Reads the provider's source again (a key file, a slot file), so the next
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

    /// Whether the provider keys only a database that exists already (or one it was told to create), so
    /// that opening a path where no database is must not make a file first.
    ///
    /// A keyed `FMDatabaseQueue` or `FMDatabasePool` about to open a path where no database is asks such
    /// a provider for the new database's key (``key(for:)`` with no salt) before SQLite opens anything:
    /// when that throws, the caller gets the error and no file was ever created (not even one removed
    /// afterwards). ``KeySlotKeyProvider`` answers true: a slotted database is made by
    /// `KeySlots.createDatabase` or `fmdb-cipher keys init`, and only a provider asked for that very path
    /// (``KeySlotKeyProvider/creatingDatabase(at:)``) answers with a key. A provider that wraps another
    /// (``ReloadableKeyProvider``, ``SystemdCredentialKeyProvider``) answers what the wrapped one answers.
    /// The default is false: the provider's key makes a new database. A `file:` URI path is opened as
    /// SQLite reads it, without this check: a failed open there may leave the file SQLite made.
    ///
    /// ```swift
    /// let provider = try ReloadableKeyProvider { KeySlotKeyProvider(secret: .passphrase(passphrase)) }
    /// provider.requiresExistingDatabase  // true: FMDatabaseQueue(path: missing, keyProvider: provider)
    ///                                    // creates no file
    /// ```
    var requiresExistingDatabase: Bool { get }

    /// The cipher settings every connection keyed with this provider gets: what a file needs besides its
    /// key (a plaintext header and its salt, HMAC and KDF algorithms, HMAC off, page size, KDF iterations).
    ///
    /// `FMDatabase.setKey(using:)`, `FMDatabaseQueue`, `FMDatabasePool` and the copy API apply them to each
    /// connection they key with the provider; settings given to `setKey(using:settings:)` or a copy call
    /// explicitly win, setting by setting (`CipherSettings/filling(from:)`). A queue's or pool's rekey changes
    /// the key, never the plaintext header, salt, algorithms, page size or KDF iterations: the new provider
    /// keeps the replaced one's settings, and one carrying other settings is refused (SQLITE_MISUSE) before
    /// anything changes. A `replaceKeyProvider` to a provider with nil here (or with only some settings) keeps
    /// the settings of the provider replaced that it does not give. The default is nil (the file's own
    /// settings, found by format). Give a provider settings with ``withCipherSettings(_:)`` (given again, they
    /// add to the provider's). A provider of your own that hands out another provider's keys must pass that
    /// provider's settings on here too.
    ///
    /// ```swift
    /// let settings = CipherSettings(plaintextHeaderSize: 32, salt: salt)  // an iOS shared-container file
    /// let queue = try FMDatabaseQueue(path: path, keyProvider: RawKeyProvider(key: key).withCipherSettings(settings))
    /// ```
    var cipherSettings: CipherSettings? { get }
}

extension KeyProvider {
    /// Default: nothing to read again (see ``KeyProvider/reloadKey()``).
    public func reloadKey() throws {}

    /// Default: false, the provider's key makes a new database (see ``KeyProvider/requiresExistingDatabase``).
    public var requiresExistingDatabase: Bool { false }

    /// Default: nil, no settings besides the file's own (see ``KeyProvider/cipherSettings``).
    public var cipherSettings: CipherSettings? { nil }

    /// This provider, carrying `settings` for every connection it keys (see ``KeyProvider/cipherSettings``).
    ///
    /// ```swift
    /// let provider = PassphraseKeyProvider("p").withCipherSettings(CipherSettings(usesHMAC: false))
    /// let pool = try FMDatabasePool(path: path, keyProvider: provider)
    /// ```
    public func withCipherSettings(_ settings: CipherSettings) -> CipherSettingsKeyProvider {
        // Settings given again add to (and win over) those the provider carried: one wrapper, never a stack.
        CipherSettingsKeyProvider(unwrappedKeyProvider, settings: settings.filling(from: cipherSettings))
    }
}
