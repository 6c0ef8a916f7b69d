internal import COpenSSL
import Foundation

/// OpenSSL's memory primitives: the only wipe, constant-time comparison and random source the library
/// uses (`SecureBytes` and everything above it go through these).
enum OpenSSLMemory {
    /// Overwrites `count` bytes at `pointer` so the compiler cannot drop the write (`OPENSSL_cleanse`).
    static func cleanse(_ pointer: UnsafeMutableRawPointer, count: Int) {
        OPENSSL_cleanse(pointer, count)
    }

    /// Whether `count` bytes at `left` and `right` are equal, in time that does not depend on where they
    /// differ (`CRYPTO_memcmp`).
    static func equalInConstantTime(_ left: UnsafeRawPointer, _ right: UnsafeRawPointer, count: Int) -> Bool {
        CRYPTO_memcmp(left, right, count) == 0
    }

    /// Fills `buffer` from OpenSSL's CSPRNG (`RAND_bytes`); false when it could not.
    static func randomBytes(into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = buffer.baseAddress, buffer.count <= Int(Int32.max) else { return buffer.isEmpty }
        guard RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
            OpenSSLErrors.drain(after: "RAND_bytes")
            return false
        }
        return true
    }

    /// A buffer's bytes as the `unsigned char *` OpenSSL's EVP calls take.
    static func bytes(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }

    /// A buffer's bytes as the `unsigned char *` OpenSSL's EVP calls write to.
    static func mutableBytes(_ buffer: UnsafeMutableRawBufferPointer) -> UnsafeMutablePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }
}
