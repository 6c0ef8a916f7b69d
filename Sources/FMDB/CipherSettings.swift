import Foundation

/// Cipher settings for a database this connection writes through `attachDatabase` (export, encrypt).
///
/// SQLCipher 3.4.1 defaults: 1024-byte pages, PBKDF2 64,000 iterations, HMAC-SHA1 per page.
///
/// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/>
public struct CipherSettings: Sendable, Equatable {
    /// `PRAGMA cipher_page_size`: 512 to 65,536, a power of two. The `sqlcipher` shell then needs the same
    /// `PRAGMA cipher_page_size` after `PRAGMA key`.
    public var pageSize: Int?
    /// `PRAGMA kdf_iter`: the iterations of SQLCipher's own KDF (passphrase keys only).
    public var kdfIterations: Int?

    /// Settings; nil keeps SQLCipher's default.
    public init(pageSize: Int? = nil, kdfIterations: Int? = nil) {
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
    }

    /// Throws for settings SQLCipher would reject or silently ignore.
    public func validate() throws {
        if let pageSize, pageSize < 512 || pageSize > 65_536 || pageSize & (pageSize - 1) != 0 {
            throw FMDatabaseError.misuse("The cipher page size must be a power of two from 512 to 65536 (got \(pageSize)).")
        }
        if let kdfIterations, kdfIterations < 1 {
            throw FMDatabaseError.misuse("kdf_iter must be positive (got \(kdfIterations)).")
        }
    }
}
