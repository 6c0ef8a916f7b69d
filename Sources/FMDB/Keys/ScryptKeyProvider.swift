import Foundation

/// A memory-hard key derivation: scrypt (OpenSSL `EVP_PBE_scrypt`) over the file's 16-byte salt, once
/// per salt, handing the raw key to every connection.
///
/// ```swift
/// let provider = ScryptKeyProvider(passphrase: "correct horse battery staple")  // N=2^15, r=8, p=1
/// let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
/// ```
///
/// Parameters (RFC 7914): `n` is the CPU/memory cost (a power of two), `r` the block size, `p` the
/// parallelism. Memory use is about `128 * n * r * p` bytes: 32 MiB for the defaults (N=2^15, r=8,
/// p=1). `maxMemory` caps what OpenSSL may allocate (default 64 MiB); parameters that need more fail.
/// `n` below 2^14 is refused unless `unsafeAllowWeakParameters` is set (tests only).
///
/// Files keyed this way open in the `sqlcipher` shell with `PRAGMA key = "x'<hex of the derived key>'"`.
///
/// Related OpenSSL documentation: <https://www.openssl.org/docs/man3.0/man3/EVP_PBE_scrypt.html>
public final class ScryptKeyProvider: KeyProvider {
    /// The lowest `n` accepted without `unsafeAllowWeakParameters`.
    public static let minimumN: UInt64 = 1 << 14

    /// scrypt's CPU/memory cost N (a power of two).
    public let n: UInt64
    /// scrypt's block size r.
    public let r: UInt64
    /// scrypt's parallelism p.
    public let p: UInt64
    /// The most memory OpenSSL may use for one derivation, in bytes.
    public let maxMemory: UInt64
    private let passphrase: SecureBytes
    private let allowsWeak: Bool
    private let cache = DerivedKeyCache()

    /// A provider for `passphrase` (UTF-8) with scrypt parameters N, r, p and a memory cap.
    public convenience init(
        passphrase: String,
        n: UInt64 = 1 << 15,
        r: UInt64 = 8,
        p: UInt64 = 1,
        maxMemory: UInt64 = 64 * 1024 * 1024,
        unsafeAllowWeakParameters: Bool = false
    ) {
        self.init(
            secret: SecureBytes(utf8: passphrase), n: n, r: r, p: p, maxMemory: maxMemory,
            allowsWeak: unsafeAllowWeakParameters)
    }

    init(secret: SecureBytes, n: UInt64, r: UInt64, p: UInt64, maxMemory: UInt64, allowsWeak: Bool) {
        self.passphrase = secret
        self.n = n
        self.r = r
        self.p = p
        self.maxMemory = maxMemory
        self.allowsWeak = allowsWeak
    }

    /// How many derivations this provider has run (one per distinct salt).
    public var derivationCount: Int { cache.derivationCount }

    /// The key for `request` (see `KeyProvider`).
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for an empty passphrase or settings below the floor.
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        guard !passphrase.isEmpty else { throw FMDatabaseError.misuse("An empty passphrase was given.") }
        guard n > 1, n & (n - 1) == 0, r > 0, p > 0 else {
            throw FMDatabaseError.misuse("scrypt needs n a power of two greater than 1, and r, p > 0.")
        }
        guard allowsWeak || n >= Self.minimumN else {
            throw FMDatabaseError.misuse("scrypt n=\(n) is below the floor of \(Self.minimumN).")
        }
        return try cache.key(for: request) { salt in
            try KeyDerivation.scrypt(passphrase, salt: salt, n: n, r: r, p: p, maxMemory: maxMemory)
        }
    }
}
