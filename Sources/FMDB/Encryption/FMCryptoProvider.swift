import Foundation

/// Which crypto provider SQLCipher uses for the connections of this process.
///
/// ```swift
/// FMDatabase.cryptoProvider = .sqlcipher   // before the first keyed connection
/// ```
///
/// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#cipher_provider>
/// - Note: FMDB compatibility: FMDB on Apple platforms has no such switch; SQLCipher there uses its
///   CommonCrypto provider.
public enum FMCryptoProvider: Sendable, Equatable {
    /// FMDBCipher's provider (the default): the same algorithms and bytes as SQLCipher's OpenSSL provider,
    /// with OpenSSL 3 algorithms fetched once per process and contexts reused across pages.
    /// `PRAGMA cipher_provider` answers "fmdbcipher-openssl". Used only on SQLCipher versions whose
    /// provider layout was verified (3.4.1, 4.5.1 to 4.6.1, 4.19.0); on any other (4.7 to 4.18 among them),
    /// SQLCipher's own provider stays, and the library says so once at debug level.
    case library
    /// SQLCipher's own OpenSSL provider (`PRAGMA cipher_provider` answers "openssl").
    case sqlcipher
}
