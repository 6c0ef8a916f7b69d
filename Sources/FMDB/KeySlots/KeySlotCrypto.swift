import Foundation

/// The cryptography of key slots, all through OpenSSL's libcrypto: AES-256-GCM to wrap the data key,
/// scrypt / PBKDF2-HMAC-SHA512 / HMAC-SHA256 to make key-encryption keys, HMAC-SHA256 for the slot
/// file's whole-file tag, and the recovery key's typeable form. Every key lives in `SecureBytes`.
enum KeySlotCrypto {
    static let dataKeyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    /// AES-256-GCM encryption of `plaintext` under `key` with a fresh random nonce: (nonce, ciphertext, tag).
    static func seal(_ plaintext: SecureBytes, key: SecureBytes, aad: Data) throws -> (
        nonce: Data, ciphertext: Data, tag: Data
    ) {
        try AuthenticatedEncryption.seal(plaintext, key: key, aad: aad, nonceLength: nonceLength, tagLength: tagLength)
    }

    /// AES-256-GCM decryption; nil when the tag does not verify (wrong key, or altered data).
    static func open(ciphertext: Data, nonce: Data, tag: Data, key: SecureBytes, aad: Data) throws -> SecureBytes? {
        guard nonce.count == nonceLength, tag.count == tagLength, key.count == 32 else { return nil }
        return try AuthenticatedEncryption.open(ciphertext: ciphertext, nonce: nonce, tag: tag, key: key, aad: aad)
    }

    /// HMAC-SHA256(key, message) into secure storage.
    static func hmacSHA256(key: SecureBytes, _ message: Data) throws -> SecureBytes {
        try MessageAuthentication.hmac(.sha256, key: key, message)
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: UnsafeRawBufferPointer) -> Data {
        MessageAuthentication.sha256(bytes)
    }

    /// PBKDF2-HMAC-SHA512 of `secret` over `salt` (32 bytes).
    static func pbkdf2SHA512(_ secret: SecureBytes, salt: Data, iterations: Int) throws -> SecureBytes {
        try KeyDerivation.pbkdf2(secret, salt: salt, digest: .sha512, iterations: iterations)
    }

    /// scrypt of `secret` over `salt` (32 bytes), OpenSSL allowed what the parameters need.
    static func scrypt(_ secret: SecureBytes, salt: Data, n: UInt64, r: UInt64, p: UInt64) throws -> SecureBytes {
        try KeyDerivation.scrypt(secret, salt: salt, n: n, r: r, p: p)
    }
}

// MARK: - Recovery keys

/// The typeable form of a recovery key: 20 random bytes (160 bits) as 32 Crockford base32 characters in
/// eight groups of four, then a ninth group of four characters that checks the other eight (the first
/// 20 bits of their SHA-256), e.g. `7K2M-Q9XD-...-R4TZ`. Case, hyphens and spaces do not matter; the
/// letters I and L read as 1, O as 0. A typo is caught by the check group before any slot is tried.
enum RecoveryKeyCode {
    static let byteCount = 20
    private static let alphabet: StaticString = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

    /// A fresh recovery key: its 20 bytes and its formatted text, both in secure storage.
    static func generate() throws -> (bytes: SecureBytes, text: SecureBytes) {
        let bytes = try secureRandomBytes(byteCount)
        return (bytes, format(bytes))
    }

    /// 36 characters of base32 (32 of key, 4 of check) in nine groups of four, hyphen-separated.
    static func format(_ bytes: SecureBytes) -> SecureBytes {
        let digits = symbols(of: bytes)
        let total = digits.count + digits.count / 4 - 1
        return SecureBytes(count: total) { out in
            alphabet.withUTF8Buffer { letters in
                digits.withUnsafeBytes { symbols in
                    var position = 0
                    for (index, digit) in symbols.enumerated() {
                        if index > 0, index % 4 == 0 {
                            out[position] = UInt8(ascii: "-")
                            position += 1
                        }
                        out[position] = letters[Int(digit)]
                        position += 1
                    }
                }
            }
        }
    }

    /// The 20 key bytes of typed text; throws when the text is malformed or the check group differs.
    /// The decoded symbols are the key, five bits each: they live only in wiped storage.
    static func parse(_ text: SecureBytes) throws -> SecureBytes {
        let symbolCount = 36
        var count = 0
        try text.withUnsafeBytes { typed in
            for character in typed where character != UInt8(ascii: "-") && character != UInt8(ascii: " ") {
                guard value(of: character) != nil else {
                    throw FMDatabaseError.misuse("A recovery key holds only letters, digits and hyphens.")
                }
                count += 1
            }
        }
        guard count == symbolCount else {
            throw FMDatabaseError.misuse("A recovery key has 36 characters in nine groups of four (got \(count)).")
        }
        let values = SecureBytes(count: symbolCount) { out in
            text.withUnsafeBytes { typed in
                var position = 0
                for character in typed {
                    guard let value = value(of: character) else { continue }
                    out[position] = value
                    position += 1
                }
            }
        }
        let bytes = SecureBytes(count: byteCount) { out in
            values.withUnsafeBytes { symbols in
                var accumulator: UInt32 = 0
                var bits = 0
                var position = 0
                for value in symbols[0..<32] {
                    accumulator = (accumulator << 5) | UInt32(value)
                    bits += 5
                    if bits >= 8 {
                        bits -= 8
                        out[position] = UInt8((accumulator >> UInt32(bits)) & 0xFF)
                        position += 1
                    }
                }
                accumulator = 0
            }
        }
        let expected = checkSymbols(of: bytes)
        let checks = values.withUnsafeBytes { symbols in (0..<4).allSatisfy { symbols[32 + $0] == expected[$0] } }
        guard checks else {
            throw FMDatabaseError.misuse("The recovery key does not check out: a character was mistyped.")
        }
        return bytes
    }

    /// The 36 base32 symbols (32 of key, 4 of check), in wiped storage.
    private static func symbols(of bytes: SecureBytes) -> SecureBytes {
        let check = checkSymbols(of: bytes)
        return SecureBytes(count: 36) { out in
            bytes.withUnsafeBytes { raw in
                var accumulator: UInt32 = 0
                var bits = 0
                var position = 0
                for byte in raw {
                    accumulator = (accumulator << 8) | UInt32(byte)
                    bits += 8
                    while bits >= 5 {
                        bits -= 5
                        out[position] = UInt8((accumulator >> UInt32(bits)) & 0x1F)
                        position += 1
                    }
                    accumulator &= (1 << UInt32(bits)) - 1
                }
                for symbol in check {
                    out[position] = symbol
                    position += 1
                }
            }
        }
    }

    /// Four base32 symbols: the first 20 bits of SHA-256 of the key bytes.
    private static func checkSymbols(of bytes: SecureBytes) -> [UInt8] {
        let digest = bytes.withUnsafeBytes { KeySlotCrypto.sha256($0) }
        let bits = UInt32(digest[0]) << 12 | UInt32(digest[1]) << 4 | UInt32(digest[2]) >> 4
        return (0..<4).map { UInt8((bits >> UInt32(15 - 5 * $0)) & 0x1F) }
    }

    private static func value(of character: UInt8) -> UInt8? {
        var c = character
        if c >= UInt8(ascii: "a"), c <= UInt8(ascii: "z") { c -= 32 }
        switch c {
        case UInt8(ascii: "O"): return 0
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        default: break
        }
        return alphabet.withUTF8Buffer { letters in
            letters.firstIndex(of: c).map { UInt8($0) }
        }
    }
}
