internal import COpenSSL
import Foundation

/// HMAC and SHA-256, once each: the key-slot file's tags and key-encryption keys (HMAC-SHA256), the
/// SQLCipher 4 verifier's page MAC (HMAC-SHA512, or the SHA1/SHA256 an app chose), the recovery key's check
/// group (SHA-256).
enum MessageAuthentication {
    enum Digest {
        case sha1, sha256, sha512

        var size: Int {
            switch self {
            case .sha1: 20
            case .sha256: 32
            case .sha512: 64
            }
        }

        fileprivate var md: OpaquePointer? {
            switch self {
            case .sha1: EVP_sha1()
            case .sha256: EVP_sha256()
            case .sha512: EVP_sha512()
            }
        }
    }

    /// HMAC(`key`, `message`) with `digest`, into wiped storage.
    /// - Throws: SQLITE_ERROR when OpenSSL fails.
    static func hmac(_ digest: Digest, key: SecureBytes, _ message: Data) throws -> SecureBytes {
        guard let keyLength = Int32(exactly: key.count) else {
            throw FMDatabaseError.misuse("HMAC takes a key of at most \(Int32.max) bytes.")
        }
        return try SecureBytes(count: digest.size) { out in
            var length = UInt32(digest.size)
            let result = key.withUnsafeBytes { keyBytes in
                message.withUnsafeBytes { messageBytes in
                    HMAC(
                        digest.md, keyBytes.baseAddress, keyLength,
                        messageBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), messageBytes.count,
                        out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
                }
            }
            guard result != nil, length == UInt32(digest.size) else {
                OpenSSLErrors.drain(after: "HMAC")
                throw FMDatabaseError(code: SQLITE_ERROR, message: "OpenSSL HMAC failed.")
            }
        }
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: UnsafeRawBufferPointer) -> Data {
        var digest = Data(count: 32)
        digest.withUnsafeMutableBytes { out in
            _ = SHA256(
                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
                out.baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
        return digest
    }
}
