import Foundation

/// Checks a key against page 1 of a SQLCipher 4 file with OpenSSL alone, for a SQLCipher 3 library that
/// cannot read the format: so the right key to a SQLCipher 4 file is told apart from a wrong key.
///
/// SQLCipher 4's default format (sqlcipher.c / crypto_impl.c of SQLCipher 4.x):
/// - the file starts with a random 16-byte salt; pages are 4096 bytes, each ending in a reserve of 80
///   bytes: a 16-byte IV, then the 64-byte HMAC;
/// - a passphrase becomes the 32-byte key with PBKDF2-HMAC-SHA512, 256,000 iterations, over the salt
///   (a raw key is used as it is);
/// - the HMAC key is PBKDF2-HMAC-SHA512 of the key, over the salt XOR 0x3a (`HMAC_SALT_MASK`), with 2
///   iterations (`FAST_PBKDF2_ITER`), 32 bytes;
/// - page 1's HMAC is HMAC-SHA512 over its bytes 16 ..< 4096 - 80 (the ciphertext after the salt), the IV,
///   and the page number 1 as 4 bytes little-endian (`CIPHER_FLAG_LE_PGNO`).
///
/// Runs only when no format the linked SQLCipher knows matched (the failure path): its PBKDF2 costs what
/// SQLCipher 4's own does.
enum SQLCipher4Verifier {
    static let pageSize = CipherFormat.v4.pageSize
    static let reserve = 80
    static let ivSize = 16
    static let hmacSize = 64
    static let saltMask: UInt8 = 0x3a

    /// Whether the file at `path` is a SQLCipher 4 database that `key` opens. False for a file too short
    /// to hold page 1, of a size that is not a whole number of 4096-byte pages, or whose HMAC does not match.
    static func isSQLCipher4File(atPath path: String, salt: Data, key: () throws -> DatabaseKey) -> Bool {
        guard let page = readPageOne(atPath: path), salt.count == 16, page.prefix(16) == salt,
            let derived = try? encryptionKey(try key(), salt: salt)
        else {
            return false
        }
        return pageOneMatches(page, key: derived, salt: salt)
    }

    /// The first 4096 bytes, when the file is a whole number of 4096-byte pages. Read through SQLite
    /// (`DatabaseFile.readStart`): closing a descriptor of our own would drop this process's locks on it.
    static func readPageOne(atPath path: String) -> Data? {
        guard let (page, size) = DatabaseFile.readStart(ofFileAt: path, count: pageSize),
            size >= Int64(pageSize), size % Int64(pageSize) == 0, page.count == pageSize
        else {
            return nil
        }
        return page
    }

    /// The 32-byte encryption key SQLCipher 4 uses for `key` with this salt.
    static func encryptionKey(_ key: DatabaseKey, salt: Data) throws -> SecureBytes {
        switch key.material {
        case .raw(let raw, _):
            return raw
        case .passphrase(let passphrase):
            let format = CipherFormat.v4
            return try PBKDF2KeyProvider.derive(
                passphrase: passphrase, salt: salt, digest: format.kdfDigest,
                iterations: format.kdfIterations)
        }
    }

    /// Whether page 1's stored HMAC is the one `key` gives.
    static func pageOneMatches(_ page: Data, key: SecureBytes, salt: Data) -> Bool {
        let hmacSalt = Data(salt.map { $0 ^ saltMask })
        guard
            let hmacKey = try? PBKDF2KeyProvider.derive(passphrase: key, salt: hmacSalt, digest: .sha512, iterations: 2)
        else {
            return false
        }
        let payloadEnd = pageSize - reserve + ivSize
        var message = Data(page[16..<payloadEnd])
        message.append(contentsOf: [1, 0, 0, 0])
        let stored = page[payloadEnd..<(payloadEnd + hmacSize)]
        guard hmacSize == MessageAuthentication.Digest.sha512.size,
            let mac = try? MessageAuthentication.hmac(.sha512, key: hmacKey, message)
        else { return false }
        // Constant time, as SQLCipher compares: the result says only "matches" or not.
        return stored.withUnsafeBytes { storedBytes in
            mac.withUnsafeBytes { macBytes in
                guard let left = storedBytes.baseAddress, let right = macBytes.baseAddress else { return false }
                return OpenSSLMemory.equalInConstantTime(left, right, count: hmacSize)
            }
        }
    }
}
