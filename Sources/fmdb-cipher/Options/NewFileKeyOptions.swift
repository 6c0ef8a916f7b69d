import ArgumentParser
import FMDB

/// The kinds of key a new encrypted file can be made with (`encrypt --kdf`, `export --new-kdf`): every `KDF`
/// but `slot-recovery`, since recovery keys are generated (`--recovery`), never given.
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

/// The key and settings of the one encrypted file `encrypt` makes, in the tool's one flag language: `--kdf`
/// goes with the key given (`--key-*`), as in every command; the settings of a file a command writes are
/// `--new-cipher-page-size` and `--new-kdf-iter`, and the same values open it afterwards as
/// `--cipher-page-size` / `--kdf-iter`.
struct NewFileKeyOptions: ParsableArguments {
    @OptionGroup var from: KeySourceOptions

    @Option(
        name: .customLong("kdf"),
        help:
            """
            How the key given is used: passphrase (SQLCipher's own KDF, shell compatible), pbkdf2-sqlcipher, pbkdf2, \
            scrypt, raw; slot, slot-raw (a new slotted database). The same --kdf opens DEST.
            """
    )
    var kind: NewFileKDF = .passphrase

    @Option(
        name: .customLong("new-cipher-page-size"),
        help: ArgumentHelp(
            "DEST's cipher page size (default: the linked SQLCipher's, 1024 on 3.x, 4096 on 4.x); --cipher-page-size "
                + "opens it.",
            valueName: "BYTES"))
    var newCipherPageSize: Int?

    @Option(
        name: .customLong("new-kdf-iter"),
        help: ArgumentHelp(
            "DEST's KDF iterations (passphrase keys; default: the format's, 64000 for 3, 256000 for 4; at least "
                + "64000); --kdf-iter opens it.",
            valueName: "N"))
    var newKDFIterations: Int?

    @OptionGroup var choices: NewCipherChoiceOptions

    var kdf: KDF { kind.kdf }
    var source: KeySource? { from.source }

    /// DEST's page size, and the option that gave it (for messages).
    var pageSize: (value: Int?, option: String) { (newCipherPageSize, "--new-cipher-page-size") }

    /// DEST's KDF iterations, and the option that gave them.
    var iterations: (value: Int?, option: String) { (newKDFIterations, "--new-kdf-iter") }

    func validate() throws {
        do {
            try CipherOptionRange.check(pageSize: pageSize.value, option: pageSize.option)
            try CipherOptionRange.check(iterations: iterations.value, option: iterations.option)
        } catch let error as CLIError {
            throw ValidationError(error.message)
        }
    }
}
