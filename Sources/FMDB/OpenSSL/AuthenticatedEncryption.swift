internal import COpenSSL
import Foundation

/// AES-256-GCM, the key slots' wrapping of the data key (`EVP_aes_256_gcm`).
enum AuthenticatedEncryption {
    /// AES-256-GCM's key, and the nonce and tag lengths the library uses (a shorter tag would be accepted
    /// by OpenSSL and weaken the authentication; a shorter key or nonce would be read past its end).
    static let keyLength = 32
    static let standardNonceLength = 12
    static let standardTagLength = 16

    /// AES-256-GCM encryption of `plaintext` under `key` with a fresh random nonce: (nonce, ciphertext, tag).
    static func seal(_ plaintext: SecureBytes, key: SecureBytes, aad: Data, nonceLength: Int, tagLength: Int) throws
        -> (nonce: Data, ciphertext: Data, tag: Data)
    {
        guard key.count == keyLength, nonceLength == standardNonceLength, tagLength == standardTagLength,
            plaintext.count <= Int(Int32.max), aad.count <= Int(Int32.max)
        else { throw FMDatabaseError.misuse("AES-256-GCM takes a 32-byte key, a 12-byte nonce and a 16-byte tag.") }
        let nonce = try secureRandomBytes(nonceLength).withUnsafeBytes { Data($0) }
        var ciphertext = Data(count: plaintext.count)
        var tag = Data(count: tagLength)
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSLErrors.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        let ok: Bool = key.withUnsafeBytes { keyBytes in
            nonce.withUnsafeBytes { nonceBytes in
                aad.withUnsafeBytes { aadBytes in
                    plaintext.withUnsafeBytes { input in
                        ciphertext.withUnsafeMutableBytes { output in
                            tag.withUnsafeMutableBytes { tagBytes in
                                var length: Int32 = 0
                                guard
                                    EVP_EncryptInit_ex(
                                        context, EVP_aes_256_gcm(), nil, OpenSSLMemory.bytes(keyBytes),
                                        OpenSSLMemory.bytes(nonceBytes))
                                        == 1,
                                    EVP_EncryptUpdate(
                                        context, nil, &length, OpenSSLMemory.bytes(aadBytes), Int32(aadBytes.count))
                                        == 1,
                                    EVP_EncryptUpdate(
                                        context, OpenSSLMemory.mutableBytes(output), &length,
                                        OpenSSLMemory.bytes(input), Int32(input.count))
                                        == 1,
                                    EVP_EncryptFinal_ex(
                                        context, OpenSSLMemory.mutableBytes(output)?.advanced(by: Int(length)), &length)
                                        == 1,
                                    EVP_CIPHER_CTX_ctrl(
                                        context, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), tagBytes.baseAddress) == 1
                                else { return false }
                                return true
                            }
                        }
                    }
                }
            }
        }
        guard ok else { throw OpenSSLErrors.failure("AES-256-GCM encryption") }
        return (nonce, ciphertext, tag)
    }

    /// AES-256-GCM decryption; nil when the tag does not verify (wrong key, or altered data). Throws
    /// (SQLITE_ERROR) when OpenSSL could not run the decryption at all.
    static func open(ciphertext: Data, nonce: Data, tag: Data, key: SecureBytes, aad: Data) throws -> SecureBytes? {
        guard key.count == keyLength, nonce.count == standardNonceLength, tag.count == standardTagLength,
            ciphertext.count <= Int(Int32.max), aad.count <= Int(Int32.max)
        else { return nil }
        let tagLength = tag.count
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSLErrors.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        // A set-up failure (reported, and thrown: it says nothing about the key, so a caller must not take it
        // for a wrong key and remember that) differs from a tag that does not verify (an answer: wrong key or
        // altered data, nil); either way the queue is left empty.
        var setUp = false
        var verified = false
        let plaintext = SecureBytes(count: ciphertext.count) { output in
            verified = key.withUnsafeBytes { keyBytes in
                nonce.withUnsafeBytes { nonceBytes in
                    aad.withUnsafeBytes { aadBytes in
                        ciphertext.withUnsafeBytes { input in
                            var tagCopy = tag
                            return tagCopy.withUnsafeMutableBytes { tagBytes in
                                var length: Int32 = 0
                                guard
                                    EVP_DecryptInit_ex(
                                        context, EVP_aes_256_gcm(), nil, OpenSSLMemory.bytes(keyBytes),
                                        OpenSSLMemory.bytes(nonceBytes))
                                        == 1,
                                    EVP_DecryptUpdate(
                                        context, nil, &length, OpenSSLMemory.bytes(aadBytes), Int32(aadBytes.count))
                                        == 1,
                                    EVP_DecryptUpdate(
                                        context, OpenSSLMemory.mutableBytes(output), &length,
                                        OpenSSLMemory.bytes(input), Int32(input.count))
                                        == 1,
                                    EVP_CIPHER_CTX_ctrl(
                                        context, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), tagBytes.baseAddress) == 1
                                else { return false }
                                setUp = true
                                var finalLength: Int32 = 0
                                return EVP_DecryptFinal_ex(
                                    context, OpenSSLMemory.mutableBytes(output)?.advanced(by: Int(length)), &finalLength
                                ) > 0
                            }
                        }
                    }
                }
            }
        }
        if !verified {
            guard setUp else { throw OpenSSLErrors.failure("AES-256-GCM decryption") }
            OpenSSLErrors.clear()
        }
        return verified ? plaintext : nil
    }
}
