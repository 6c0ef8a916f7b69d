import CSQLCipher
import Foundation

/// Cipher settings for a database this connection keys (`setKey(using:settings:)`) or attaches
/// (`attachDatabase`, for export and encrypt): page size, KDF iterations, file format, and the settings
/// SQLCipher lets an app choose besides: a plaintext header and the salt kept outside the file (iOS apps
/// in shared containers), the HMAC and KDF algorithms, and whether pages carry an HMAC at all.
///
/// Each choice is applied with its PRAGMA right after the key, after the format's
/// (`cipher_compatibility` resets them). One the linked SQLCipher does not have (asked of it: a keyed
/// connection answers the PRAGMA or not) is refused with `SQLITE_FORMAT` (24) naming the SQLCipher that
/// has it: `cipher_plaintext_header_size`, `cipher_salt`, `cipher_hmac_algorithm` and
/// `cipher_kdf_algorithm` are SQLCipher 4's; `cipher_use_hmac` is in both lines.
///
/// Defaults are the format's (`CipherFormat`): SQLCipher 4 (on 4.x) 4096-byte pages, PBKDF2-HMAC-SHA512
/// 256,000 iterations, HMAC-SHA512 per page; SQLCipher 3 (on 3.x) 1024-byte pages, PBKDF2-HMAC-SHA1
/// 64,000 iterations, HMAC-SHA1 per page.
///
/// The KDF floor: a **new** file (missing or empty, when keyed or attached) is never written with fewer
/// than `minimumKDFIterations` iterations unless the settings were made with
/// `init(pageSize:unsafeKDFIterations:)`; opening an existing file with its own lower count is allowed
/// (that count is needed to read it).
///
/// ```swift
/// try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 256_000))  // new file
/// try old.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(kdfIterations: 4_000))  // existing file
/// let weak = CipherSettings(unsafeKDFIterations: 1)  // tests only
/// ```
///
/// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/>
public struct CipherSettings: Sendable, Equatable {
    /// The fewest PBKDF2 iterations a new file gets without the `unsafe` spelling: SQLCipher 3's own default.
    public static let minimumKDFIterations = CipherFormat.v3.kdfIterations

    /// `PRAGMA cipher_page_size`: 512 to 65,536, a power of two. The `sqlcipher` shell then needs the same
    /// `PRAGMA cipher_page_size` after `PRAGMA key`.
    public var pageSize: Int?
    /// `PRAGMA kdf_iter`: the iterations of SQLCipher's own KDF (passphrase keys only), 1 to 2,147,483,647
    /// (`kdfIterationRange`).
    public var kdfIterations: Int?
    /// The file format (`PRAGMA cipher_compatibility` on SQLCipher 4): nil writes new files in the linked
    /// SQLCipher's default format and finds an existing file's format; a format is used as given (the
    /// page size and KDF iterations above then adjust it).
    public var format: CipherFormat?

    /// `PRAGMA cipher_plaintext_header_size` (SQLCipher 4): how many bytes at the start of the file stay
    /// unencrypted (32 for iOS apps in shared app-group containers, so iOS sees a SQLite header; a multiple
    /// of 16). Such a file does not hold its salt: give it as `salt`, as the app that wrote it keeps it.
    /// A size above 0 without `salt` is refused (SQLITE_MISUSE), for new files and existing ones alike.
    public var plaintextHeaderSize: Int?
    /// `PRAGMA cipher_salt` (SQLCipher 4): the 16-byte KDF salt, for a file with a plaintext header (which
    /// does not hold it) or a new file that should get this one. It is the salt every key is made over: a
    /// deriving provider (PBKDF2, scrypt) derives over it on a new file, an existing one and a rekey, and a
    /// raw key that carries another salt (`x'<key><salt>'`) is refused (SQLITE_MISUSE). Not a secret to
    /// SQLCipher (a file without a plaintext header keeps it in the clear in its first 16 bytes): errors never
    /// show it, but fmdb-cipher prints it in the flags that open a file it wrote (`open_with`, and the note on
    /// standard error), since without it that file cannot be opened.
    public var salt: Data?
    /// `PRAGMA cipher_hmac_algorithm` (SQLCipher 4): the HMAC of every page.
    public var hmacAlgorithm: HMACAlgorithm?
    /// `PRAGMA cipher_kdf_algorithm` (SQLCipher 4): the PBKDF2 digest of a passphrase and of the HMAC key.
    public var kdfAlgorithm: KDFAlgorithm?
    /// `PRAGMA cipher_use_hmac` (SQLCipher 3 and 4): false for files whose pages carry no HMAC. A new file
    /// written with false is weaker than SQLCipher's default: its pages can be altered undetected.
    public var usesHMAC: Bool?

    /// Whether a new file may get fewer than `minimumKDFIterations` iterations (made with
    /// `init(pageSize:unsafeKDFIterations:)`).
    public private(set) var allowsWeakKDF = false

    /// An HMAC algorithm SQLCipher 4 authenticates pages with: its `PRAGMA cipher_hmac_algorithm` value.
    public enum HMACAlgorithm: String, Sendable, CaseIterable {
        /// HMAC-SHA1: SQLCipher 3's; weaker than SQLCipher 4's default for a new file.
        case sha1 = "HMAC_SHA1"
        /// HMAC-SHA256.
        case sha256 = "HMAC_SHA256"
        /// HMAC-SHA512: SQLCipher 4's default.
        case sha512 = "HMAC_SHA512"
    }

    /// A PBKDF2 digest SQLCipher 4 derives keys with: its `PRAGMA cipher_kdf_algorithm` value.
    public enum KDFAlgorithm: String, Sendable, CaseIterable {
        /// PBKDF2-HMAC-SHA1: SQLCipher 3's; for a new file a passphrase is cheaper to guess than with the default.
        case pbkdf2SHA1 = "PBKDF2_HMAC_SHA1"
        /// PBKDF2-HMAC-SHA256.
        case pbkdf2SHA256 = "PBKDF2_HMAC_SHA256"
        /// PBKDF2-HMAC-SHA512: SQLCipher 4's default.
        case pbkdf2SHA512 = "PBKDF2_HMAC_SHA512"
    }

    /// Settings; nil keeps SQLCipher's default.
    public init(
        pageSize: Int? = nil, kdfIterations: Int? = nil, format: CipherFormat? = nil,
        plaintextHeaderSize: Int? = nil, salt: Data? = nil, hmacAlgorithm: HMACAlgorithm? = nil,
        kdfAlgorithm: KDFAlgorithm? = nil, usesHMAC: Bool? = nil
    ) {
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
        self.format = format
        self.plaintextHeaderSize = plaintextHeaderSize
        self.salt = salt
        self.hmacAlgorithm = hmacAlgorithm
        self.kdfAlgorithm = kdfAlgorithm
        self.usesHMAC = usesHMAC
    }

    /// Settings that may write a new file with any positive iteration count, below the floor included.
    /// For tests and for files another program requires: weak counts make passphrases cheap to guess.
    public init(pageSize: Int? = nil, unsafeKDFIterations: Int, format: CipherFormat? = nil) {
        self.pageSize = pageSize
        self.format = format
        self.kdfIterations = unsafeKDFIterations
        self.allowsWeakKDF = true
    }

    /// The KDF iteration counts SQLCipher can be given: it parses `PRAGMA kdf_iter` with C's `atoi` into an
    /// `int`, so a larger number would reach it as another one (4,294,967,297 as 1, 2,147,483,648 as a
    /// negative count that fails key derivation).
    public static let kdfIterationRange = 1...Int(Int32.max)

    /// The cipher page sizes SQLCipher accepts: a power of two from 512 to 65,536.
    public static let pageSizeRange = 512...65_536

    /// Throws for settings SQLCipher would reject, silently ignore or read as another number.
    public func validate() throws {
        if let pageSize { try Self.validatePageSize(pageSize) }
        if let kdfIterations { try Self.validateKDFIterations(kdfIterations) }
        if let plaintextHeaderSize { try Self.validatePlaintextHeaderSize(plaintextHeaderSize) }
        if let salt, salt.count != 16 {
            throw FMDatabaseError.misuse("The cipher salt must be 16 bytes (got \(salt.count)).")
        }
        if let plaintextHeaderSize, plaintextHeaderSize > 0, salt == nil {
            throw FMDatabaseError.misuse(Self.plaintextHeaderNeedsSalt)
        }
    }

    /// Why a plaintext header without `salt` is refused: such a file does not hold its salt, so SQLCipher
    /// would write a new one with a random salt it keeps nowhere, and no later open could read it.
    public static let plaintextHeaderNeedsSalt =
        "A plaintext header needs its salt: the file does not hold it, so it cannot be opened (nor written "
        + "so that it can be opened again) without it. Give the 16-byte salt the app keeps as CipherSettings.salt "
        + "(fmdb-cipher: --cipher-salt / --new-cipher-salt)."

    /// The plaintext header sizes SQLCipher takes: a multiple of 16 (its cipher block) from 0 to 1024, within
    /// the smallest page's room.
    public static let plaintextHeaderSizeRange = 0...1024

    /// Throws (SQLITE_MISUSE) unless `size` is a plaintext header size SQLCipher takes: a multiple of 16 in
    /// `plaintextHeaderSizeRange`. The one check, for `validate()` and fmdb-cipher's options.
    public static func validatePlaintextHeaderSize(_ size: Int) throws {
        guard plaintextHeaderSizeRange.contains(size), size % 16 == 0 else {
            throw FMDatabaseError.misuse(
                "The plaintext header size must be a multiple of 16 from 0 to 1024 (got \(size)); iOS apps in "
                    + "shared containers use 32.")
        }
    }

    /// These settings, each one not given (nil) taken from `other`: settings given to a call win over those
    /// its key provider carries (``KeyProvider/cipherSettings``), setting by setting.
    ///
    /// ```swift
    /// let given = CipherSettings(pageSize: 8192)
    /// given.filling(from: CipherSettings(usesHMAC: false))  // pageSize 8192, usesHMAC false
    /// ```
    public func filling(from other: CipherSettings?) -> CipherSettings {
        guard let other else { return self }
        var filled = self
        filled.pageSize = pageSize ?? other.pageSize
        if kdfIterations == nil {
            filled.kdfIterations = other.kdfIterations
            filled.allowsWeakKDF = other.allowsWeakKDF
        }
        filled.format = format ?? other.format
        filled.plaintextHeaderSize = plaintextHeaderSize ?? other.plaintextHeaderSize
        filled.salt = salt ?? other.salt
        filled.hmacAlgorithm = hmacAlgorithm ?? other.hmacAlgorithm
        filled.kdfAlgorithm = kdfAlgorithm ?? other.kdfAlgorithm
        filled.usesHMAC = usesHMAC ?? other.usesHMAC
        return filled
    }

    /// Whether `other` gives the same value for every setting of a file (whether a weak KDF count was spelled
    /// `unsafe…` is not one).
    func describesTheSameFile(as other: CipherSettings) -> Bool {
        pageSize == other.pageSize && kdfIterations == other.kdfIterations && format == other.format
            && plaintextHeaderSize == other.plaintextHeaderSize && salt == other.salt
            && hmacAlgorithm == other.hmacAlgorithm && kdfAlgorithm == other.kdfAlgorithm && usesHMAC == other.usesHMAC
    }

    /// Whether any setting besides page size, KDF iterations and format is given (`choiceStatements`).
    var makesChoices: Bool {
        plaintextHeaderSize != nil || salt != nil || hmacAlgorithm != nil || kdfAlgorithm != nil || usesHMAC != nil
    }

    /// Throws (SQLITE_MISUSE) unless `pageSize` is a cipher page size SQLCipher takes as it is: a power of
    /// two in `pageSizeRange`. The one check of a cipher page size, for `validate()` and fmdb-cipher's options.
    public static func validatePageSize(_ pageSize: Int) throws {
        guard pageSizeRange.contains(pageSize), pageSize & (pageSize - 1) == 0 else {
            throw FMDatabaseError.misuse(
                "The cipher page size must be a power of two from 512 to 65536 (got \(pageSize)).")
        }
    }

    /// Throws (SQLITE_MISUSE) unless `iterations` is in `kdfIterationRange`, so the count SQLCipher's `atoi`
    /// reads is the count given. The one check of a KDF iteration count, for `validate()` and fmdb-cipher's options.
    public static func validateKDFIterations(_ iterations: Int) throws {
        guard kdfIterationRange.contains(iterations) else {
            throw FMDatabaseError.misuse(
                "kdf_iter must be from 1 to \(kdfIterationRange.upperBound), the range of the C int SQLCipher reads "
                    + "it into (got \(iterations))."
            )
        }
    }

    /// `validate()`, and the KDF floor when these settings are about to write a new file.
    func validate(creatingFile: Bool) throws {
        try validate()
        if creatingFile, !allowsWeakKDF, let kdfIterations, kdfIterations < Self.minimumKDFIterations {
            throw FMDatabaseError.misuse(
                "A new database is not written with \(kdfIterations) KDF iterations: the floor is "
                    + "\(Self.minimumKDFIterations). Use CipherSettings(unsafeKDFIterations:) (fmdb-cipher: "
                    + "--unsafe-new-kdf-iter) if you must."
            )
        }
    }
}

extension FMDatabase {
    /// The KDF floor for a rekey: SQLCipher re-derives a new **passphrase** with the connection's own
    /// `kdf_iter`, so rekeying a file opened with a count below the floor would write it weak again.
    /// Refused (SQLITE_MISUSE): copy it with `exportContents` / `fmdb-cipher export --new-kdf-iter`
    /// instead. A raw key (`x'…'`) has no KDF and is always allowed.
    func checkKDFFloorForRekey(to newKey: SecureBytes) throws {
        guard let connection, !newKey.isRawKeyLiteral else { return }
        let text = try connection.pragmaText("PRAGMA kdf_iter")
        guard let iterations = text.flatMap({ Int($0) }), iterations < CipherSettings.minimumKDFIterations else {
            return
        }
        throw FMDatabaseError.misuse(
            "This database uses \(iterations) KDF iterations, below the floor of "
                + "\(CipherSettings.minimumKDFIterations): a passphrase rekey would keep that count. Copy it with "
                + "fmdb-cipher export --new-kdf-iter \(CipherSettings.minimumKDFIterations) (or attachDatabase + "
                + "exportContents), or rekey to a raw key."
        )
    }
}

extension SecureBytes {
    /// Whether these key bytes are one of SQLCipher's raw-key literals, for which no KDF runs: exactly
    /// `x'` + 64 hexadecimal digits (the key) or 96 (the key and the salt) + `'`. Anything else — `x'pass'`
    /// included — is a passphrase, which SQLCipher derives with the connection's `kdf_iter`.
    var isRawKeyLiteral: Bool {
        withUnsafeBytes { bytes in
            guard bytes.count == 64 + 3 || bytes.count == 96 + 3,
                bytes[0] == UInt8(ascii: "x") || bytes[0] == UInt8(ascii: "X"),
                bytes[1] == UInt8(ascii: "'"), bytes[bytes.count - 1] == UInt8(ascii: "'")
            else { return false }
            return bytes[2..<(bytes.count - 1)].allSatisfy { byte in
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
            }
        }
    }
}

extension SecureBytes {
    /// Throws (SQLITE_MISUSE) when these key bytes are a 96-digit raw-key literal (`x'<key><salt>'`) whose salt
    /// is not `salt`: SQLCipher takes the literal's salt over `PRAGMA cipher_salt`, so the file would be keyed
    /// under a salt the settings do not give. Neither salt is put in the message.
    func requireEmbeddedSalt(matching salt: Data?) throws {
        guard let salt else { return }
        let matches = withUnsafeBytes { bytes -> Bool in
            guard bytes.count == 96 + 3, isRawKeyLiteral else { return true }
            let digits = Array(bytes[(2 + 64)..<(2 + 96)])
            return salt.enumerated().allSatisfy { index, byte in
                guard let high = Self.hexValue(digits[2 * index]), let low = Self.hexValue(digits[2 * index + 1])
                else { return false }
                return high << 4 | low == byte
            }
        }
        guard matches else {
            throw FMDatabaseError.misuse(
                "The raw key carries a salt other than CipherSettings.salt (--cipher-salt): SQLCipher would use the "
                    + "key's, and the file would not open with the salt given. Give the 64-digit key alone, or the "
                    + "same salt in both.")
        }
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension CipherSettings {
    /// `request` with `salt` as its salt when one is given: the salt a deriving provider (PBKDF2, scrypt)
    /// derives over must be the one SQLCipher keys the file with, on a new file, an existing one and a rekey.
    /// Without it a provider picks a random salt for a new file and hands it in the raw key, which SQLCipher
    /// takes over `PRAGMA cipher_salt`: a file with a plaintext header would be written under a salt kept nowhere.
    func keyRequest(_ request: KeyRequest) -> KeyRequest {
        guard let salt else { return request }
        return KeyRequest(databasePath: request.databasePath, salt: salt, format: request.format)
    }

    /// The statements that select `format` on a connection keyed just before (none when nil), then those of
    /// the settings an app chose (`choiceStatements`).
    func formatStatements() throws -> [String] {
        try (format?.selectionStatements() ?? []) + choiceStatements()
    }

    /// The PRAGMAs of the settings an app chose besides page size and KDF iterations, for a connection (or
    /// the attached `schema`) keyed just before, after the format's statements (`cipher_compatibility` resets
    /// the algorithms). Throws `SQLITE_FORMAT` for one the linked SQLCipher does not have.
    func choiceStatements(schema: String? = nil) throws -> [String] {
        let pragma = schema.map { "PRAGMA \($0)." } ?? "PRAGMA "
        var statements: [(name: String, setting: String, value: String)] = []
        if let hmacAlgorithm { statements.append(("cipher_hmac_algorithm", "hmacAlgorithm", hmacAlgorithm.rawValue)) }
        if let kdfAlgorithm { statements.append(("cipher_kdf_algorithm", "kdfAlgorithm", kdfAlgorithm.rawValue)) }
        if let usesHMAC { statements.append(("cipher_use_hmac", "usesHMAC", usesHMAC ? "ON" : "OFF")) }
        if let plaintextHeaderSize {
            statements.append(("cipher_plaintext_header_size", "plaintextHeaderSize", "\(plaintextHeaderSize)"))
        }
        if let salt {
            let hex = salt.map { String(format: "%02x", $0) }.joined()
            statements.append(("cipher_salt", "salt", "\"x'\(hex)'\""))
        }
        return try statements.map { statement in
            guard CipherPragmaSupport.linkedSQLCipherHas(statement.name) else {
                throw FMDatabaseError(
                    code: SQLITE_FORMAT,
                    message: "CipherSettings.\(statement.setting) (PRAGMA \(statement.name)) needs SQLCipher 4: the "
                        + "linked SQLCipher \(SQLCipherRuntime.version ?? "3") does not have it. Install SQLCipher 4 "
                        + "and rebuild, or open the file on a SQLCipher 4 system")
            }
            return pragma + statement.name + " = " + statement.value
        }
    }
}

/// Which cipher PRAGMAs the linked SQLCipher has, asked of it once per process: a keyed scratch connection
/// answers a PRAGMA it knows (`PRAGMA cipher_hmac_algorithm` → `HMAC_SHA512`) and nothing for one it does not.
enum CipherPragmaSupport {
    static let asked = [
        "cipher_hmac_algorithm", "cipher_kdf_algorithm", "cipher_use_hmac", "cipher_plaintext_header_size",
        "cipher_salt",
    ]

    private static let answers: [String: Bool] = {
        guard let connection = Connection.openScratchKeyed() else { return [:] }
        defer { try? connection.close() }
        var answers: [String: Bool] = [:]
        for name in asked { answers[name] = ((try? connection.pragmaText("PRAGMA \(name)")) ?? nil) != nil }
        return answers
    }()

    /// Whether the linked SQLCipher answers `PRAGMA name` (one of `asked`) on a keyed connection.
    static func linkedSQLCipherHas(_ name: String) -> Bool {
        answers[name] ?? false
    }
}
