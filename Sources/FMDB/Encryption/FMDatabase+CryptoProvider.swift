import Foundation

extension FMDatabase {
    /// The crypto provider SQLCipher uses for every keyed connection of the process: `.library` (the
    /// default) or `.sqlcipher`, SQLCipher's own OpenSSL provider.
    ///
    /// The choice is read once, when the library keys its first connection, and holds for the process;
    /// setting it later changes nothing (`db.cipherProvider` tells what a connection uses). The environment
    /// variable `FMDB_CRYPTO_PROVIDER=sqlcipher` sets the default without code (and so works for the
    /// `fmdb-cipher` tool). Files are byte-compatible either way: the choice changes speed, never format.
    ///
    /// ```swift
    /// FMDatabase.cryptoProvider = .sqlcipher       // at start-up, before any keyed open
    /// let db = FMDatabase(path: path)
    /// db.open()
    /// try db.setKey(using: provider)
    /// print(db.cipherProvider ?? "")               // "openssl"
    /// ```
    ///
    /// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#cipher_provider>
    /// - Note: FMDB compatibility: not in FMDB, whose SQLCipher on Apple platforms uses CommonCrypto.
    public static var cryptoProvider: FMCryptoProvider {
        // The choice is kept where the registration reads it (Core/ names no type of the features above it).
        get { CryptoProviderRegistration.isLibraryProviderRequested.withLock { $0 } ? .library : .sqlcipher }
        set { CryptoProviderRegistration.isLibraryProviderRequested.withLock { $0 = newValue == .library } }
    }
}
