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
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSLErrors.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        var plaintext = Data(count: ciphertext.count + blockLength)
        let written: Int32? = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBytes { ivBytes in
                ciphertext.withUnsafeBytes { input in
                    plaintext.withUnsafeMutableBytes { output in
                        var length: Int32 = 0
                        var finalLength: Int32 = 0
                        guard
                            EVP_DecryptInit_ex(
                                context, EVP_aes_256_cbc(), nil, OpenSSLMemory.bytes(keyBytes),
                                OpenSSLMemory.bytes(ivBytes)) == 1,
                            EVP_CIPHER_CTX_set_padding(context, 0) == 1,
                            EVP_DecryptUpdate(
                                context, OpenSSLMemory.mutableBytes(output), &length, OpenSSLMemory.bytes(input),
                                Int32(input.count)) == 1,
                            EVP_DecryptFinal_ex(
                                context, OpenSSLMemory.mutableBytes(output)?.advanced(by: Int(length)), &finalLength)
                                == 1
                        else { return nil }
                        return length + finalLength
                    }
                }
            }
        }
        guard let written, Int(written) == ciphertext.count else {
            throw OpenSSLErrors.failure("AES-256-CBC decryption")
        }
        return plaintext.prefix(ciphertext.count)
    }
}
