internal import COpenSSL
import Foundation

/// AES-256-CBC decryption of whole blocks (`EVP_aes_256_cbc`, no padding): SQLCipher's page cipher, for
/// reading the first block of page 1 of a file the linked SQLCipher cannot open (`SQLCipher4Verifier`).
enum PageDecryption {
    static let keyLength = 32
    static let blockLength = 16

    /// The plaintext of `ciphertext` (a whole number of 16-byte blocks) under `key` and `iv`; nil for inputs of
    /// the wrong size. Throws (SQLITE_ERROR) when OpenSSL could not run the decryption.
    static func decryptCBC(_ ciphertext: Data, key: SecureBytes, iv: Data) throws -> Data? {
        guard key.count == keyLength, iv.count == blockLength, !ciphertext.isEmpty,
            ciphertext.count % blockLength == 0, ciphertext.count <= Int(Int32.max)
        else { return nil }
        guard let context = EVP_CIPHER_CTX_new() else { throw failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        var plaintext = Data(count: ciphertext.count + blockLength)
        let written: Int32? = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBytes { ivBytes in
                ciphertext.withUnsafeBytes { input in
                    plaintext.withUnsafeMutableBytes { output in
                        var length: Int32 = 0
                        var finalLength: Int32 = 0
                        guard
                            EVP_DecryptInit_ex(context, EVP_aes_256_cbc(), nil, u8(keyBytes), u8(ivBytes)) == 1,
                            EVP_CIPHER_CTX_set_padding(context, 0) == 1,
                            EVP_DecryptUpdate(context, mu8(output), &length, u8(input), Int32(input.count)) == 1,
                            EVP_DecryptFinal_ex(context, mu8(output)?.advanced(by: Int(length)), &finalLength) == 1
                        else { return nil }
                        return length + finalLength
                    }
                }
            }
        }
        guard let written, Int(written) == ciphertext.count else { throw failure("AES-256-CBC decryption") }
        return plaintext.prefix(ciphertext.count)
    }

    /// The error of a failed OpenSSL call, after the queue it left is reported and emptied.
    private static func failure(_ what: String) -> FMDatabaseError {
        OpenSSLErrors.drain(after: what)
        return FMDatabaseError(code: SQLITE_ERROR, message: "OpenSSL \(what) failed.")
    }

    private static func u8(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }

    private static func mu8(_ buffer: UnsafeMutableRawBufferPointer) -> UnsafeMutablePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }
}
