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
/// Other settings an app chose (`CipherSettings`: page size, KDF iterations, HMAC and KDF algorithms) are
/// used as given: the reserve is then the IV and the HMAC rounded up to the 16-byte cipher block (48 for
/// HMAC-SHA1 and HMAC-SHA256), and the HMAC key is derived with the KDF algorithm. A file without page HMACs
/// (`usesHMAC == false`: the reserve is the IV alone) is told by decrypting page 1's first block (AES-256-CBC
/// under the key and the page's IV): the right key gives the SQLite header fields that must hold there — the
/// page size given, file-format bytes 1/1 or 2/2, the reserve (the IV's, or the IV and HMAC's the file was
/// keyed with before the HMAC was turned off), payload fractions 64/32/32 — which a wrong key matches by
/// chance about once in 2^63. A file with a plaintext header (`plaintextHeaderSize`, with its `salt`, which
/// the file does not hold) is checked the same way from the end of the header: SQLCipher 4 encrypts and
/// authenticates page 1 from there (a file without page HMACs and with a plaintext header gives no verdict).
///
/// Runs only when no format the linked SQLCipher knows matched (the failure path): its PBKDF2 costs what
/// SQLCipher 4's own does.
enum SQLCipher4Verifier {
    static let ivSize = 16
    static let saltMask: UInt8 = 0x3a

    /// SQLCipher 4's page layout and key derivation under `settings` (its defaults where nil).
    struct Layout {
        var pageSize = CipherFormat.v4.pageSize
        var kdfIterations = CipherFormat.v4.kdfIterations
        var kdfDigest = PBKDF2KeyProvider.Digest.sha512
        var hmacDigest = MessageAuthentication.Digest.sha512
        var usesHMAC = true

        init(_ settings: CipherSettings = CipherSettings()) {
            if let pageSize = settings.pageSize { self.pageSize = pageSize }
            usesHMAC = settings.usesHMAC ?? true
            if let iterations = settings.kdfIterations { kdfIterations = iterations }
            switch settings.kdfAlgorithm {
            case .pbkdf2SHA1: kdfDigest = .sha1
            case .pbkdf2SHA256: kdfDigest = .sha256
            case .pbkdf2SHA512, nil: kdfDigest = .sha512
            }
            switch settings.hmacAlgorithm {
            case .sha1: hmacDigest = .sha1
            case .sha256: hmacDigest = .sha256
            case .sha512, nil: hmacDigest = .sha512
            }
        }

        /// The bytes at the end of every page: the IV and the HMAC, rounded up to the cipher block.
        var reserve: Int { (SQLCipher4Verifier.ivSize + (usesHMAC ? hmacDigest.size : 0) + 15) / 16 * 16 }
    }

    /// Whether the file at `path` is a SQLCipher 4 database that `key` opens with `settings`. False for a file
    /// too short to hold page 1, of a size that is not a whole number of pages, whose HMAC does not match, or
    /// whose settings leave nothing to verify (a plaintext header); without page HMACs, when page 1's first
    /// block does not decrypt to SQLite's header fields.
    static func isSQLCipher4File(
        atPath path: String, salt: Data, settings: CipherSettings = CipherSettings(), key: () throws -> DatabaseKey
    ) -> Bool {
        let header = settings.plaintextHeaderSize ?? 0
        let layout = Layout(settings)
        guard header == 0 || layout.usesHMAC, let page = readPageOne(atPath: path, pageSize: layout.pageSize),
            salt.count == 16, header > 0 || page.prefix(16) == salt,
            let derived = try? encryptionKey(try key(), salt: salt, layout: layout)
        else {
            return false
        }
        guard layout.usesHMAC else { return pageOneDecrypts(page, key: derived, layout: layout) }
        return pageOneMatches(page, key: derived, salt: salt, layout: layout, offset: header > 0 ? header : 16)
    }

    /// Whether page 1's first block, after the salt, decrypts under `key` to the SQLite header fields that
    /// must hold there (bytes 16 ..< 24 of the header): the page size, file-format bytes 1/1 (rollback journal)
    /// or 2/2 (WAL), the reserve, and the payload fractions 64/32/32.
    static func pageOneDecrypts(_ page: Data, key: SecureBytes, layout: Layout) -> Bool {
        let ivStart = layout.pageSize - layout.reserve
        guard ivStart >= 32, ivStart + ivSize <= page.count,
            let block = try? PageDecryption.decryptCBC(
                Data(page[16..<32]), key: key, iv: Data(page[ivStart..<(ivStart + ivSize)])),
            block.count == 16
        else { return false }
        let fields = Array(block.prefix(8))
        // SQLite's header keeps the reserve the file was keyed with: SQLCipher 4 writes the IV alone at the end of
        // each page when the HMAC is off, but a file whose HMAC was turned off after the key (`PRAGMA key`, then
        // `PRAGMA cipher_use_hmac = OFF`, as the shell and apps do) says the reserve with the HMAC (80).
        var withHMAC = layout
        withHMAC.usesHMAC = true
        let reserves = [layout.reserve, withHMAC.reserve]
        let pageSizeField = layout.pageSize == 65_536 ? 1 : layout.pageSize
        return Int(fields[0]) << 8 | Int(fields[1]) == pageSizeField
            && ((fields[2] == 1 && fields[3] == 1) || (fields[2] == 2 && fields[3] == 2))
            && reserves.contains(Int(fields[4])) && fields[5] == 64 && fields[6] == 32 && fields[7] == 32
    }

    /// The first `pageSize` bytes, when the file is a whole number of such pages. Read through SQLite
    /// (`DatabaseFile.readStart`): closing a descriptor of our own would drop this process's locks on it.
    static func readPageOne(atPath path: String, pageSize: Int) -> Data? {
        guard let (page, size) = DatabaseFile.readStart(ofFileAt: path, count: pageSize),
            size >= Int64(pageSize), size % Int64(pageSize) == 0, page.count == pageSize
        else {
            return nil
        }
        return page
    }

    /// The 32-byte encryption key SQLCipher 4 uses for `key` with this salt.
    static func encryptionKey(_ key: DatabaseKey, salt: Data, layout: Layout) throws -> SecureBytes {
        switch key.material {
        case .raw(let raw, _):
            return raw
        case .passphrase(let passphrase):
            return try PBKDF2KeyProvider.derive(
                passphrase: passphrase, salt: salt, digest: layout.kdfDigest, iterations: layout.kdfIterations)
        }
    }

    /// Whether page 1's stored HMAC is the one `key` gives: over its ciphertext from `offset` (16, after the salt;
    /// or the end of a plaintext header), the IV and the page number.
    static func pageOneMatches(_ page: Data, key: SecureBytes, salt: Data, layout: Layout, offset: Int = 16) -> Bool {
        let hmacSalt = Data(salt.map { $0 ^ saltMask })
        guard
            let hmacKey = try? PBKDF2KeyProvider.derive(
                passphrase: key, salt: hmacSalt, digest: layout.kdfDigest, iterations: 2)
        else {
            return false
        }
        let hmacSize = layout.hmacDigest.size
        let payloadEnd = layout.pageSize - layout.reserve + ivSize
        guard payloadEnd + hmacSize <= page.count, payloadEnd > offset else { return false }
        var message = Data(page[offset..<payloadEnd])
        message.append(contentsOf: [1, 0, 0, 0])
        let stored = page[payloadEnd..<(payloadEnd + hmacSize)]
        guard let mac = try? MessageAuthentication.hmac(layout.hmacDigest, key: hmacKey, message), mac.count == hmacSize
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
