import ArgumentParser
import FMDB
import Foundation

/// `--cipher-hmac-algorithm` / `--cipher-kdf-algorithm` values: SQLCipher's own spellings (`HMAC_SHA256`,
/// `PBKDF2_HMAC_SHA256`), in any case, or the digest alone (`sha256`).
struct CipherAlgorithmName: ExpressibleByArgument {
    /// The digest: SHA1, SHA256 or SHA512.
    let digest: String

    init?(argument: String) {
        let upper = argument.uppercased()
        let digest = ["HMAC_", "PBKDF2_HMAC_"].reduce(upper) { name, prefix in
            name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : name
        }
        guard ["SHA1", "SHA256", "SHA512"].contains(digest) else { return nil }
        self.digest = digest
    }

    static var allValueStrings: [String] { ["HMAC_SHA1", "HMAC_SHA256", "HMAC_SHA512"] }

    var hmac: CipherSettings.HMACAlgorithm? { CipherSettings.HMACAlgorithm(rawValue: "HMAC_" + digest) }
    var kdf: CipherSettings.KDFAlgorithm? { CipherSettings.KDFAlgorithm(rawValue: "PBKDF2_HMAC_" + digest) }
}

/// `--cipher-use-hmac on|off`.
enum OnOff: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

/// The settings SQLCipher lets an app choose besides page size and KDF iterations, for the file a command
/// reads (`--cipher-…`); `NewCipherChoiceOptions` gives them for a file a command writes (`--new-cipher-…`).
/// What the linked SQLCipher does not have is refused when the file is opened (exit 69, naming SQLCipher 4).
struct CipherChoiceOptions: ParsableArguments {
    @Option(
        name: .customLong("cipher-plaintext-header-size"),
        help: ArgumentHelp(
            "The bytes the encrypted database keeps unencrypted at its start (32 for iOS apps in shared containers; "
                + "SQLCipher 4). Give its salt with --cipher-salt.",
            valueName: "BYTES"))
    var plaintextHeaderSize: Int?

    @Option(
        name: .customLong("cipher-salt"),
        help: ArgumentHelp(
            "The database's 16-byte salt, as 32 hex digits (bare or x'...'), for a file with a plaintext header, "
                + "which does not hold it (SQLCipher 4).",
            valueName: "HEX"))
    var salt: String?

    @Option(
        name: .customLong("cipher-hmac-algorithm"),
        help: ArgumentHelp(
            "The page HMAC the app chose: HMAC_SHA1, HMAC_SHA256 or HMAC_SHA512 (SQLCipher 4).", valueName: "NAME"))
    var hmacAlgorithm: CipherAlgorithmName?

    @Option(
        name: .customLong("cipher-kdf-algorithm"),
        help: ArgumentHelp(
            "The KDF digest the app chose: PBKDF2_HMAC_SHA1, PBKDF2_HMAC_SHA256 or PBKDF2_HMAC_SHA512 (SQLCipher 4).",
            valueName: "NAME"))
    var kdfAlgorithm: CipherAlgorithmName?

    @Option(
        name: .customLong("cipher-use-hmac"),
        help: ArgumentHelp("off for a database whose pages carry no HMAC (cipher_use_hmac = OFF).", valueName: "on|off")
    )
    var useHMAC: OnOff?

    func validate() throws {
        _ = try settings(CipherSettings())
    }

    /// `base` with these choices.
    func settings(_ base: CipherSettings) throws -> CipherSettings {
        try CipherChoices(
            plaintextHeaderSize: plaintextHeaderSize, salt: salt, hmac: hmacAlgorithm, kdf: kdfAlgorithm,
            useHMAC: useHMAC, prefix: "--cipher-"
        ).apply(to: base)
    }
}

/// The same choices for the file a command writes: `--new-cipher-…`.
struct NewCipherChoiceOptions: ParsableArguments {
    @Option(
        name: .customLong("new-cipher-plaintext-header-size"),
        help: ArgumentHelp(
            "The bytes the new file keeps unencrypted at its start (SQLCipher 4); it opens with "
                + "--cipher-plaintext-header-size and --cipher-salt. export keeps SRC's header and salt unless "
                + "given; 0 drops it.",
            valueName: "BYTES"))
    var plaintextHeaderSize: Int?

    @Option(
        name: .customLong("new-cipher-salt"),
        help: ArgumentHelp("The new file's 16-byte salt, as 32 hex digits (SQLCipher 4).", valueName: "HEX"))
    var salt: String?

    @Option(
        name: .customLong("new-cipher-hmac-algorithm"),
        help: ArgumentHelp("The new file's page HMAC (SQLCipher 4).", valueName: "NAME"))
    var hmacAlgorithm: CipherAlgorithmName?

    @Option(
        name: .customLong("new-cipher-kdf-algorithm"),
        help: ArgumentHelp("The new file's KDF digest (SQLCipher 4).", valueName: "NAME"))
    var kdfAlgorithm: CipherAlgorithmName?

    @Option(
        name: .customLong("new-cipher-use-hmac"),
        help: ArgumentHelp(
            "off to write the new file without page HMACs (weaker: pages can be altered undetected; warned).",
            valueName: "on|off"))
    var useHMAC: OnOff?

    func validate() throws {
        _ = try settings(CipherSettings())
    }

    /// `base` with these choices.
    func settings(_ base: CipherSettings) throws -> CipherSettings {
        try CipherChoices(
            plaintextHeaderSize: plaintextHeaderSize, salt: salt, hmac: hmacAlgorithm, kdf: kdfAlgorithm,
            useHMAC: useHMAC, prefix: "--new-cipher-"
        ).apply(to: base)
    }
}

/// One set of choices as given, checked and applied to `CipherSettings` (messages name the options, never a
/// salt's digits).
struct CipherChoices {
    let plaintextHeaderSize: Int?
    let salt: String?
    let hmac: CipherAlgorithmName?
    let kdf: CipherAlgorithmName?
    let useHMAC: OnOff?
    let prefix: String

    func apply(to base: CipherSettings) throws -> CipherSettings {
        var settings = base
        if let plaintextHeaderSize {
            do {
                try CipherSettings.validatePlaintextHeaderSize(plaintextHeaderSize)
            } catch let error as FMDatabaseError {
                throw ValidationError("\(prefix)plaintext-header-size: " + error.message)
            }
            settings.plaintextHeaderSize = plaintextHeaderSize
        }
        if let salt {
            guard let bytes = Self.saltBytes(salt) else {
                throw ValidationError(
                    "\(prefix)salt takes the 16-byte salt as 32 hexadecimal digits, bare or as x'...' "
                        + "(got \(salt.count) characters)")
            }
            settings.salt = bytes
        }
        settings.hmacAlgorithm = hmac?.hmac ?? settings.hmacAlgorithm
        settings.kdfAlgorithm = kdf?.kdf ?? settings.kdfAlgorithm
        if let useHMAC { settings.usesHMAC = useHMAC == .on }
        if let size = settings.plaintextHeaderSize, size > 0, settings.salt == nil {
            throw ValidationError(
                "\(prefix)plaintext-header-size needs \(prefix)salt: " + CipherSettings.plaintextHeaderNeedsSalt)
        }
        return settings
    }

    /// 16 bytes from 32 hexadecimal digits, bare or as `x'…'`; nil for anything else.
    static func saltBytes(_ text: String) -> Data? {
        var digits = Substring(text)
        if digits.count == 35, digits.first == "x" || digits.first == "X", digits.dropFirst().first == "'",
            digits.last == "'"
        {
            digits = digits.dropFirst(2).dropLast()
        }
        guard digits.count == 32, digits.allSatisfy(\.isHexDigit) else { return nil }
        var bytes = Data()
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
