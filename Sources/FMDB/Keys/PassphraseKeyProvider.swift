import Foundation

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
