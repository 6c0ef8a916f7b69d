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
}

extension KeyProvider {
    /// Default: nothing to read again (see ``KeyProvider/reloadKey()``).
    public func reloadKey() throws {}

    /// Default: false, the provider's key makes a new database (see ``KeyProvider/requiresExistingDatabase``).
    public var requiresExistingDatabase: Bool { false }
}
