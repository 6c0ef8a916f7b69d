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
/// `PRAGMA key = "x'<hex of the derived key>'"` (and, on SQLCipher 4, opens SQLCipher 3 files too: a raw
/// key does not depend on the format). `sqlcipherCompatible(passphrase:)` derives exactly what the linked
/// SQLCipher's `PRAGMA key` derives for each file's format, so its files open there with
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
    public static let minimumIterations = CipherFormat.v3.kdfIterations

    /// The HMAC digest of the derivation.
    public let digest: Digest
    /// The PBKDF2 iteration count.
    public let iterations: Int
    /// For `sqlcipherCompatible` providers: the format whose KDF they derive (`.some(nil)`: the format each
    /// request asks for, so the key is what the linked SQLCipher's `PRAGMA key` derives for that file).
    let compatibility: CipherFormat??
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

    init(secret: SecureBytes, digest: Digest, iterations: Int, allowsWeak: Bool, compatibility: CipherFormat?? = nil) {
        self.passphrase = secret
        self.digest = digest
        self.iterations = iterations
        self.allowsWeakIterations = allowsWeak
        self.compatibility = compatibility
    }

    /// The key the linked SQLCipher's own `PRAGMA key = 'passphrase'` derives for each file, in OpenSSL,
    /// once per salt: PBKDF2-HMAC-SHA512 × 256,000 for a SQLCipher 4 file, PBKDF2-HMAC-SHA1 × 64,000 for
    /// a SQLCipher 3 file (× 4,000 for 2 and 1). Files open in the `sqlcipher` shell of the same line with
    /// `PRAGMA key = 'passphrase'`, and the shell's files of either format open here.
    ///
    /// ```swift
    /// let pool = try FMDatabasePool(path: path, keyProvider: PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "p"))
    /// ```
    /// `digest` and `iterations` report the linked default format's KDF.
    /// - Note: a file whose format is not the linked default costs one derivation per format tried the
    ///   first time it is opened in a process (the format that matched is then tried first).
    public static func sqlcipherCompatible(passphrase: String) -> PBKDF2KeyProvider {
        compatible(SecureBytes(utf8: passphrase), format: nil)
    }

    /// `sqlcipherCompatible(passphrase:)` for a passphrase given as bytes.
    public static func sqlcipherCompatible(passphrase: Data) -> PBKDF2KeyProvider {
        compatible(SecureBytes(passphrase), format: nil)
    }

    /// The key SQLCipher `format`'s own `PRAGMA key` derives, whatever the file's format: for example
    /// `.v3` to make keys a SQLCipher 3 peer derives (`PRAGMA cipher_compatibility = 3` in a 4.x shell).
    ///
    /// ```swift
    /// let v3 = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "p", format: .v3)   // SHA-1 × 64,000
    /// ```
    public static func sqlcipherCompatible(passphrase: String, format: CipherFormat) -> PBKDF2KeyProvider {
        compatible(SecureBytes(utf8: passphrase), format: format)
    }

    static func compatible(_ secret: SecureBytes, format: CipherFormat?) -> PBKDF2KeyProvider {
        let shown = format ?? .linkedDefault
        return PBKDF2KeyProvider(
            secret: secret, digest: shown.kdfDigest, iterations: shown.kdfIterations,
            allowsWeak: false, compatibility: .some(format))
    }

    /// How many derivations this provider has run (one per distinct salt).
    public var derivationCount: Int { cache.derivationCount }

    /// The key for `request` (see `KeyProvider`).
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for an empty passphrase, settings below the floor, or an
    ///   iteration count outside `CipherSettings.kdfIterationRange` (OpenSSL takes a C int).
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        guard !passphrase.isEmpty else {
            throw FMDatabaseError.misuse("An empty passphrase was given.")
        }
        if let compatibility {
            // SQLCipher's own KDF for the format: below the floor only for SQLCipher 1 and 2 files.
            let format = compatibility ?? request.format
            return try cache.key(for: request, variant: UInt8(format.rawValue)) { salt in
                try Self.derive(
                    passphrase: passphrase, salt: salt, digest: format.kdfDigest, iterations: format.kdfIterations)
            }
        }
        // OpenSSL takes the count as a C int: a larger one must not reach it clamped to another count.
        try CipherSettings.validateKDFIterations(iterations)
        guard allowsWeakIterations || iterations >= Self.minimumIterations else {
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
        try KeyDerivation.pbkdf2(passphrase, salt: salt, digest: digest.keyDerivationDigest, iterations: iterations)
    }
}
