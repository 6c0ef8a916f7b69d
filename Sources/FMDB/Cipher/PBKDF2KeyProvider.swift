internal import COpenSSL
import Foundation

/// Derives a raw key from a passphrase with OpenSSL's PBKDF2-HMAC over the file's 16-byte salt, once
/// per salt, and hands that raw key to every connection: a pool of 8 connections costs one derivation,
/// where a `PassphraseKeyProvider` costs one per connection (SQLCipher runs its KDF at every open).
///
/// ```swift
/// let provider = PBKDF2KeyProvider(passphrase: "correct horse battery staple")   // SHA-512, 256,000
/// let pool = try FMDatabasePool(path: path, keyProvider: provider)
/// ```
///
/// The default (HMAC-SHA512, 256,000 iterations, 32-byte key) opens in the `sqlcipher` shell with
/// `PRAGMA key = "x'<hex of the derived key>'"`. `sqlcipherCompatible(passphrase:)` (HMAC-SHA1,
/// 64,000 iterations) derives exactly what SQLCipher 3 derives itself, so its files open there with
/// `PRAGMA key = 'passphrase'`.
///
/// Iteration counts below `minimumIterations` (64,000, SQLCipher 3's own) are refused when a key is
/// asked for; `init(passphrase:digest:unsafeIterations:)` allows them, for tests only.
///
/// Related OpenSSL documentation: <https://www.openssl.org/docs/man3.0/man3/PKCS5_PBKDF2_HMAC.html>
public final class PBKDF2KeyProvider: KeyProvider {
    /// The HMAC digest of the derivation.
    public enum Digest: Sendable {
        /// HMAC-SHA1: SQLCipher 3's own KDF digest (see `sqlcipherCompatible(passphrase:)`).
        case sha1
        /// HMAC-SHA256.
        case sha256
        /// HMAC-SHA512: the default, and SQLCipher 4's KDF digest.
        case sha512
    }

    /// The lowest iteration count the safe initializers accept: SQLCipher 3's own default.
    public static let minimumIterations = 64_000

    /// The HMAC digest of the derivation.
    public let digest: Digest
    /// The PBKDF2 iteration count.
    public let iterations: Int
    private let passphrase: SecureBytes
    private let allowsWeakIterations: Bool
    private let cache = DerivedKeyCache()

    /// A provider for `passphrase` (UTF-8).
    public convenience init(passphrase: String, digest: Digest = .sha512, iterations: Int = 256_000) {
        self.init(secret: SecureBytes(utf8: passphrase), digest: digest, iterations: iterations, allowsWeak: false)
    }

    /// A provider for a passphrase given as bytes.
    public convenience init(passphrase: Data, digest: Digest = .sha512, iterations: Int = 256_000) {
        self.init(secret: SecureBytes(passphrase), digest: digest, iterations: iterations, allowsWeak: false)
    }

    /// Allows any positive iteration count. For tests: weak counts make passphrases cheap to guess.
    public convenience init(passphrase: String, digest: Digest = .sha512, unsafeIterations: Int) {
        self.init(secret: SecureBytes(utf8: passphrase), digest: digest, iterations: unsafeIterations, allowsWeak: true)
    }

    init(secret: SecureBytes, digest: Digest, iterations: Int, allowsWeak: Bool) {
        self.passphrase = secret
        self.digest = digest
        self.iterations = iterations
        self.allowsWeakIterations = allowsWeak
    }

    /// SQLCipher 3's own key derivation (PBKDF2-HMAC-SHA1, 64,000 iterations), run once per salt:
    /// files open in the `sqlcipher` shell with `PRAGMA key = 'passphrase'`, and the shell's files open here.
    public static func sqlcipherCompatible(passphrase: String) -> PBKDF2KeyProvider {
        PBKDF2KeyProvider(passphrase: passphrase, digest: .sha1, iterations: 64_000)
    }

    /// SQLCipher 3's own KDF for a passphrase given as bytes.
    public static func sqlcipherCompatible(passphrase: Data) -> PBKDF2KeyProvider {
        PBKDF2KeyProvider(passphrase: passphrase, digest: .sha1, iterations: 64_000)
    }

    /// How many derivations this provider has run (one per distinct salt).
    public var derivationCount: Int { cache.derivationCount }

    /// The key for `request` (see `KeyProvider`).
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for an empty passphrase or settings below the floor.
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        guard !passphrase.isEmpty else {
            throw FMDatabaseError.misuse("An empty passphrase was given.")
        }
        guard iterations > 0, allowsWeakIterations || iterations >= Self.minimumIterations else {
            throw FMDatabaseError.misuse(
                "PBKDF2 iterations \(iterations) are below the floor of \(Self.minimumIterations); "
                    + "use init(passphrase:digest:unsafeIterations:) only for tests."
            )
        }
        return try cache.key(for: request) { salt in
            try Self.derive(passphrase: passphrase, salt: salt, digest: digest, iterations: iterations)
        }
    }

    static func derive(passphrase: SecureBytes, salt: Data, digest: Digest, iterations: Int) throws -> SecureBytes {
        let md: OpaquePointer?
        switch digest {
        case .sha1: md = EVP_sha1()
        case .sha256: md = EVP_sha256()
        case .sha512: md = EVP_sha512()
        }
        return try SecureBytes(count: 32) { out in
            let ok = passphrase.withUnsafeBytes { pass in
                salt.withUnsafeBytes { saltBytes in
                    PKCS5_PBKDF2_HMAC(
                        pass.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(pass.count),
                        saltBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(saltBytes.count),
                        Int32(clamping: iterations), md, 32,
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    )
                }
            }
            guard ok == 1 else {
                throw FMDatabaseError(code: SQLITE_ERROR, message: "OpenSSL PKCS5_PBKDF2_HMAC failed.")
            }
        }
    }
}
