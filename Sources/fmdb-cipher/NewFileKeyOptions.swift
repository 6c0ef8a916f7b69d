import ArgumentParser
import FMDB

/// The kinds of key a new encrypted file can be made with (`encrypt --kdf`): every `KDF` but
/// `slot-recovery`, since recovery keys are generated (`--recovery`), never given.
enum NewFileKDF: String, ExpressibleByArgument, CaseIterable {
    case passphrase
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    case pbkdf2
    case scrypt
    case raw
    case slot
    case slotRaw = "slot-raw"

    var kdf: KDF {
        switch self {
        case .passphrase: return .passphrase
        case .pbkdf2Sqlcipher: return .pbkdf2Sqlcipher
        case .pbkdf2: return .pbkdf2
        case .scrypt: return .scrypt
        case .raw: return .raw
        case .slot: return .slot
        case .slotRaw: return .slotRaw
        }
    }
}

/// The key and settings of the one encrypted file `encrypt` makes: the same names (`--kdf`,
/// `--cipher-page-size`, `--kdf-iter`) that open it afterwards, as `KeyOptions` spells them.
struct NewFileKeyOptions: ParsableArguments {
    @OptionGroup var from: KeySourceOptions

    @Option(
        name: .customLong("kdf"),
        help:
            "How the key is used: passphrase (SQLCipher's own KDF, shell compatible), pbkdf2-sqlcipher, pbkdf2, scrypt, raw; slot, slot-raw (a new slotted database)."
    )
    var kind: NewFileKDF = .passphrase

    @Option(
        name: .customLong("cipher-page-size"),
        help: ArgumentHelp(
            "DEST's cipher page size (default: the linked SQLCipher's, 1024 on 3.x, 4096 on 4.x); the same flag opens it.",
            valueName: "BYTES"))
    var cipherPageSize: Int?

    @Option(
        name: .customLong("kdf-iter"),
        help: ArgumentHelp(
            "DEST's KDF iterations (passphrase keys; default: the format's, 64000 for 3, 256000 for 4; at least 64000); the same flag opens it.",
            valueName: "N"))
    var kdfIterations: Int?

    var kdf: KDF { kind.kdf }
    var source: KeySource? { from.source }

    func validate() throws {
        do {
            try CipherOptionRange.check(pageSize: cipherPageSize, option: "--cipher-page-size")
            try CipherOptionRange.check(iterations: kdfIterations, option: "--kdf-iter")
        } catch let error as CLIError {
            throw ValidationError(error.message)
        }
    }
}
