import Foundation

/// The shared machinery of the deriving providers (PBKDF2, scrypt): one derivation per salt, reused
/// for every connection, and a stable salt for a new file so every connection that opens it before
/// its first page is written derives the same key.
final class DerivedKeyCache: Sendable {
    private struct State {
        var keysBySalt: [Data: SecureBytes] = [:]
        var newFileSalts: [String: Data] = [:]
        var derivations = 0
    }

    private let state = Protected(State())

    /// How many derivations ran (for tests and benchmarks: a pool of 8 connections costs one).
    var derivationCount: Int { state.withLock { $0.derivations } }

    /// The raw key (with the salt SQLCipher should use) for `request`, deriving it with `derive` only
    /// when this salt has not been seen.
    /// `variant` tells apart derivations of one salt with different parameters (a provider that derives
    /// SQLCipher 4's or SQLCipher 3's KDF, depending on the file's format).
    func key(for request: KeyRequest, variant: UInt8 = 0, derive: (Data) throws -> SecureBytes) throws -> DatabaseKey {
        let salt: Data
        if let existing = request.salt {
            salt = existing
        } else if let path = request.databasePath, !path.isEmpty, path != ":memory:" {
            salt = try state.withLock { state in
                if let pending = state.newFileSalts[path] { return pending }
                let fresh = try secureRandomBytes(16).withUnsafeBytes { Data($0) }
                state.newFileSalts[path] = fresh
                return fresh
            }
        } else {
            salt = try secureRandomBytes(16).withUnsafeBytes { Data($0) }
        }
        let cacheKey = variant == 0 ? salt : salt + [variant]
        if let cached = state.withLock({ $0.keysBySalt[cacheKey] }) {
            return .raw(secure: cached, salt: SecureBytes(salt))
        }
        // Derive outside the lock: a slow KDF must not block other files' cached lookups.
        let derived = try derive(salt)
        let key = state.withLock { state -> SecureBytes in
            if let raced = state.keysBySalt[cacheKey] { return raced }
            state.keysBySalt[cacheKey] = derived
            state.derivations += 1
            return derived
        }
        return .raw(secure: key, salt: SecureBytes(salt))
    }
}
