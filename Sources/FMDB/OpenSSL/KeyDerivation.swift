internal import COpenSSL
import Foundation

/// The library's two key derivations, once each: PBKDF2-HMAC (key providers, SQLCipher-compatible
/// derivation, key slots, the SQLCipher 4 verifier) and scrypt (the scrypt provider, key slots). Every
/// output is 32 bytes in wiped storage.
enum KeyDerivation {
    /// The HMAC digest of a PBKDF2 derivation.
    enum Digest: Sendable {
        case sha1, sha256, sha512

        fileprivate var md: OpaquePointer? {
            switch self {
            case .sha1: EVP_sha1()
            case .sha256: EVP_sha256()
            case .sha512: EVP_sha512()
            }
        }
    }

    /// PBKDF2-HMAC with `digest` of `secret` over `salt` (`PKCS5_PBKDF2_HMAC`).
    /// - Throws: SQLITE_MISUSE for iterations outside 1...Int32.max (OpenSSL takes a C int);
    ///   SQLITE_ERROR when OpenSSL fails.
    static func pbkdf2(_ secret: SecureBytes, salt: Data, digest: Digest, iterations: Int) throws -> SecureBytes {
        let md = digest.md
        guard let count = Int32(exactly: iterations), count > 0 else {
            throw FMDatabaseError.misuse("PBKDF2 iterations must be from 1 to \(Int32.max) (got \(iterations)).")
        }
        guard let passLength = Int32(exactly: secret.count), let saltLength = Int32(exactly: salt.count) else {
            throw FMDatabaseError.misuse("PBKDF2 takes a secret and a salt of at most \(Int32.max) bytes.")
        }
        return try SecureBytes(count: 32) { out in
            let ok = secret.withUnsafeBytes { pass in
                salt.withUnsafeBytes { saltBytes in
                    PKCS5_PBKDF2_HMAC(
                        pass.baseAddress?.assumingMemoryBound(to: CChar.self), passLength,
                        saltBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), saltLength,
                        count, md, 32,
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    )
                }
            }
            guard ok == 1 else {
                OpenSSLErrors.drain(after: "PKCS5_PBKDF2_HMAC")
                throw FMDatabaseError(code: SQLITE_ERROR, message: "OpenSSL PKCS5_PBKDF2_HMAC failed.")
            }
        }
    }

    /// The memory scrypt with these parameters needs (OpenSSL's `EVP_PBE_scrypt`: 128·r·p bytes for B and
    /// 128·r·(N + 2) for V), plus 1 MiB of slack; `UInt64.max` when that overflows.
    static func scryptMemoryNeeded(n: UInt64, r: UInt64, p: UInt64) -> UInt64 {
        let (blocks, overflow) = n.addingReportingOverflow(p)
        let (withTwo, overflow2) = blocks.addingReportingOverflow(2)
        let (perR, overflow3) = withTwo.multipliedReportingOverflow(by: r)
        let (bytes, overflow4) = perR.multipliedReportingOverflow(by: 128)
        guard !(overflow || overflow2 || overflow3 || overflow4), bytes <= .max - 1024 * 1024 else { return .max }
        return bytes + 1024 * 1024
    }

    /// scrypt of `secret` over `salt` (`EVP_PBE_scrypt`), OpenSSL allowed at most `maxMemory` bytes
    /// (nil: what the parameters need). Parameters that need more fail.
    /// - Throws: SQLITE_ERROR when OpenSSL fails (bad parameters, or more memory than allowed).
    static func scrypt(_ secret: SecureBytes, salt: Data, n: UInt64, r: UInt64, p: UInt64, maxMemory: UInt64? = nil)
        throws -> SecureBytes
    {
        let limit = maxMemory ?? scryptMemoryNeeded(n: n, r: r, p: p)
        return try SecureBytes(count: 32) { out in
            let ok = secret.withUnsafeBytes { pass in
                salt.withUnsafeBytes { saltBytes in
                    EVP_PBE_scrypt(
                        pass.baseAddress?.assumingMemoryBound(to: CChar.self), pass.count,
                        saltBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), saltBytes.count,
                        n, r, p, limit,
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self), 32
                    )
                }
            }
            guard ok == 1 else {
                OpenSSLErrors.drain(after: "EVP_PBE_scrypt")
                throw FMDatabaseError(
                    code: SQLITE_ERROR,
                    message:
                        "OpenSSL EVP_PBE_scrypt failed (n=\(n), r=\(r), p=\(p) may need more than maxMemory=\(limit) "
                        + "bytes)."
                )
            }
        }
    }
}
