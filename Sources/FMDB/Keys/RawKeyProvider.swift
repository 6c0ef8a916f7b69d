import Foundation

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
