import ArgumentParser
import FMDB
import Foundation

/// How a passphrase or key becomes a KeyProvider (`--kdf`).
enum KDF: String, ExpressibleByArgument, CaseIterable {
    /// SQLCipher's own KDF at every open: files open in the sqlcipher shell with PRAGMA key = '...'.
    case passphrase
    /// The same key as `passphrase`, derived once with OpenSSL (PBKDF2-SHA1 x 64,000).
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    /// PBKDF2-HMAC-SHA512 x 256,000 over the file's salt.
    case pbkdf2
    /// scrypt N=2^15 r=8 p=1 over the file's salt.
    case scrypt
    /// A 32-byte key, or 64 hex digits (96 with the file's salt), bare or as `x'…'`: no KDF.
    case raw
    /// A passphrase that opens a key slot (`keys`): the data key is unwrapped from `DB-keyslots`.
    case slot
    /// A raw key (32 bytes or 64 hex digits) that opens a key slot.
    case slotRaw = "slot-raw"
    /// A recovery key that opens a key slot.
    case slotRecovery = "slot-recovery"

    /// Whether the key opens a key slot (the database has a slot file).
    var opensSlot: Bool { self == .slot || self == .slotRaw || self == .slotRecovery }

    /// The key of a single-key copy made with a slot kind's key: a passphrase, or a raw key for slot-raw.
    var singleKey: KDF {
        switch self {
        case .slot, .slotRecovery: return .passphrase
        case .slotRaw: return .raw
        default: return self
        }
    }

    func provider(_ material: KeyMaterial) throws -> any KeyProvider {
        WrongKeyHint.note(material, usedWith: self)
        switch self {
        case .passphrase: return PassphraseKeyProvider(material: material)
        case .pbkdf2Sqlcipher: return PBKDF2KeyProvider.sqlcipherCompatible(material: material)
        case .pbkdf2: return PBKDF2KeyProvider(material: material)
        case .scrypt: return ScryptKeyProvider(material: material)
        case .raw: return try KDF.rawKey { try RawKeyProvider(material: material) }
        case .slot, .slotRaw, .slotRecovery:
            return KeySlotKeyProvider(secret: try slotSecret(material), logsRefusals: false)
        }
    }
}

extension KDF {
    /// `body` with a malformed raw key as a usage error (exit 64) in the tool's style, saying what a raw key
    /// is; the key itself is never repeated.
    static func rawKey<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as FMDatabaseError where FMResultCode.misuse ~= error {
            let message = error.message.prefix(1).lowercased() + error.message.dropFirst()
            throw CLIError.usage("the key is not a raw key: " + message.trimmingCharacters(in: ["."]))
        }
    }
}

/// Where a key comes from.
enum KeySource {
    case environment(String)
    case file(String)
    case standardInput
    case prompt
    case credential(String)
}

/// Where the key comes from: `--key-env`, `--key-file`, `--key-stdin` or `--key-credential` (never the
/// command line itself). Shared by every command that takes a key, whatever the key opens.
struct KeySourceOptions: ParsableArguments {
    @Option(
        name: .customLong("key-env"),
        help: ArgumentHelp("Read the key from this environment variable.", valueName: "VAR"))
    var keyEnv: String?

    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp("Read the key from this file (one trailing newline is stripped).", valueName: "PATH"))
    var keyFile: String?

    @Flag(name: .customLong("key-stdin"), help: "Read the key from the first line of standard input.")
    var keyStdin = false

    @Option(
        name: .customLong("key-credential"),
        help: ArgumentHelp("Read the key from the systemd credential $CREDENTIALS_DIRECTORY/NAME.", valueName: "NAME"))
    var keyCredential: String?

    // Refused on purpose: a key on the command line is visible to every user (ps, /proc/PID/cmdline).
    @Option(name: [.customLong("key"), .customLong("passphrase"), .customLong("password")], help: .hidden)
    var keyOnCommandLine: String?

    mutating func validate() throws {
        if keyOnCommandLine != nil {
            throw ValidationError(
                "keys are never taken on the command line, where every user on the machine can read them; "
                    + "use --key-env VAR, --key-file PATH, --key-stdin or --key-credential NAME instead"
            )
        }
        if [keyEnv != nil, keyFile != nil, keyStdin, keyCredential != nil].filter({ $0 }).count > 1 {
            throw ValidationError("give the key one way only: --key-env, --key-file, --key-stdin or --key-credential")
        }
    }

    var source: KeySource? {
        if let keyEnv { return .environment(keyEnv) }
        if let keyFile { return .file(keyFile) }
        if keyStdin { return .standardInput }
        if let keyCredential { return .credential(keyCredential) }
        return nil
    }
}

/// The key of the encrypted database a command opens and the settings it was written with (`info`, `sql`,
/// `export`, ...). The settings of a file a command writes take the same names with `new-` in front
/// (`export --new-cipher-page-size`, `encrypt --new-cipher-page-size`: `NewFileKeyOptions`), and a second key
/// `--new-key-*` and `--new-kdf` (`NewKeyOptions`): `encrypt --new-cipher-page-size 4096` then
/// `sql --cipher-page-size 4096`.
struct KeyOptions: ParsableArguments {
    @OptionGroup var from: KeySourceOptions

    @Option(
        help:
            """
            How the key is used: passphrase (SQLCipher's own KDF, shell compatible), pbkdf2-sqlcipher, pbkdf2, \
            scrypt, raw (32 bytes, or 64 hex digits, 96 with the salt, bare or as x'...'); slot, slot-raw, \
            slot-recovery (a key slot).
            """
    )
    var kdf: KDF = .passphrase

    @Option(
        name: .customLong("cipher-page-size"),
        help: ArgumentHelp(
            "The encrypted database's cipher page size, when not its format's (1024 for SQLCipher 3, 4096 for 4).",
            valueName: "BYTES"))
    var cipherPageSize: Int?

    @Option(
        name: .customLong("kdf-iter"),
        help: ArgumentHelp(
            "The encrypted database's KDF iterations (passphrase keys), when not its format's (64000 for SQLCipher 3, "
                + "256000 for 4).",
            valueName: "N"))
    var kdfIterations: Int?

    @Option(
        name: .customLong("slot"),
        help: ArgumentHelp(
            "Open a slotted database through this key slot only (an id from keys list): one key derivation, whatever "
                + "the other slots cost.",
            valueName: "ID"))
    var slotID: Int?

    /// `--slot` given with no key option where no key is prompted for.
    static var slotWithoutKey: ValidationError {
        ValidationError(
            "--slot opens through a key slot with its key: give --key-env VAR, --key-file PATH, --key-stdin or "
                + "--key-credential NAME")
    }

    @OptionGroup var choices: CipherChoiceOptions

    /// The settings given for the file read: page size, KDF iterations and the app's choices (already
    /// checked by `validate()`).
    var settings: CipherSettings {
        let base = CipherSettings(pageSize: cipherPageSize, kdfIterations: kdfIterations)
        return (try? choices.settings(base)) ?? base
    }

    var source: KeySource? { from.source }

    func validate() throws {
        do {
            try CipherOptionRange.check(pageSize: cipherPageSize, option: "--cipher-page-size")
            try CipherOptionRange.check(iterations: kdfIterations, option: "--kdf-iter")
        } catch let error as CLIError {
            throw ValidationError(error.message)
        }
        if let slotID {
            guard slotID > 0 else { throw ValidationError("--slot takes a slot id, a number from 1 (see keys list)") }
            guard kdf == .passphrase || kdf.opensSlot else {
                throw ValidationError(
                    "--slot opens through a key slot: give no --kdf, or slot, slot-raw or slot-recovery")
            }
            // Without a key (and no terminal to prompt on) nothing opens through the slot: said, not ignored.
            if source == nil, isatty(STDIN_FILENO) != 1 { throw Self.slotWithoutKey }
        }
    }
}

/// Where the new key comes from (`rekey`, `export`, `keys add`/`change`): `--new-key-env`, `--new-key-file`
/// or `--new-key-stdin`.
struct NewKeySourceOptions: ParsableArguments {
    @Option(
        name: .customLong("new-key-env"),
        help: ArgumentHelp("Read the new key from this environment variable.", valueName: "VAR"))
    var newKeyEnv: String?

    @Option(
        name: .customLong("new-key-file"),
        help: ArgumentHelp("Read the new key from this file (one trailing newline is stripped).", valueName: "PATH"))
    var newKeyFile: String?

    @Flag(
        name: .customLong("new-key-stdin"),
        help: "Read the new key from standard input (the second line when --key-stdin is given too).")
    var newKeyStdin = false

    @Option(name: [.customLong("new-key"), .customLong("new-passphrase")], help: .hidden)
    var newKeyOnCommandLine: String?

    mutating func validate() throws {
        if newKeyOnCommandLine != nil {
            throw ValidationError(
                "keys are never taken on the command line, where every user on the machine can read them; "
                    + "use --new-key-env VAR, --new-key-file PATH or --new-key-stdin instead"
            )
        }
        if [newKeyEnv != nil, newKeyFile != nil, newKeyStdin].filter({ $0 }).count > 1 {
            throw ValidationError("give the new key one way only: --new-key-env, --new-key-file or --new-key-stdin")
        }
    }

    var source: KeySource? {
        if let newKeyEnv { return .environment(newKeyEnv) }
        if let newKeyFile { return .file(newKeyFile) }
        if newKeyStdin { return .standardInput }
        return nil
    }
}

/// The new key of `rekey` and `export`, and how it is used.
struct NewKeyOptions: ParsableArguments {
    @OptionGroup var from: NewKeySourceOptions

    @Option(
        name: .customLong("new-kdf"),
        help: """
            How the new key is used (default: the same as --kdf; a slot key's: passphrase, or raw for slot-raw). \
            A file under a new key has no key slots.
            """)
    var newKDF: SingleKeyKDF?

    var source: KeySource? { from.source }
}

/// Reads keys with the library's `KeyMaterial.read(from:)` (getenv, read(2), the terminal with echo
/// off, into wiped memory), adding the tool's prompts and exit codes.
final class KeyReader {
    /// How many times a new key typed twice may differ before the command gives up.
    static let confirmationAttempts = 3

    /// The key from `source` (or a prompt when nil and standard input is a terminal). `newKey`: the key is
    /// given with the `--new-key-*` options, which a missing key's message names.
    func read(_ source: KeySource?, what: String, confirm: Bool = false, newKey: Bool = false) throws -> KeyMaterial {
        switch source ?? .prompt {
        case .environment(let name):
            if getenv(name) == nil, EnvironmentName.isShown(name) {
                throw CLIError.usage("the environment variable \(name) (the \(what)) is not set")
            }
            return try library(.environment(name: name), what: what)
        case .file(let path):
            return try library(.file(path: path), what: what)
        case .credential(let name):
            let material: KeyMaterial
            do {
                material = try SystemdCredentialKeyProvider.read(credential: name).trimmingTrailingNewline()
            } catch {
                throw CLIError.from(error, context: "the \(what)")
            }
            guard !material.isEmpty else { throw CLIError.usage("the \(what) is empty") }
            return material
        case .standardInput:
            // On a terminal, the same as the prompt: no echo.
            let terminal = isatty(STDIN_FILENO) == 1
            if terminal { Output.prompt("Enter \(what) (standard input): ") }
            defer { if terminal { Output.prompt("\n") } }
            return try library(.standardInput, what: what)
        case .prompt:
            guard isatty(STDIN_FILENO) == 1 else {
                let options =
                    newKey
                    ? "--new-key-env VAR, --new-key-file PATH or --new-key-stdin"
                    : "--key-env VAR, --key-file PATH, --key-stdin or --key-credential NAME"
                throw CLIError.usage("no \(what) given: use \(options) (or run on a terminal to be prompted)")
            }
            guard confirm else { return try library(.terminal(prompt: "Enter \(what): "), what: what) }
            // A new key is typed twice; a mismatch asks again, up to three times.
            for attempt in 1...Self.confirmationAttempts {
                let material = try library(.terminal(prompt: "Enter \(what): "), what: what)
                let again = try library(.terminal(prompt: "Repeat \(what): "), what: what)
                if again.isEqual(to: material) { return material }
                if attempt < Self.confirmationAttempts {
                    Output.message("fmdb-cipher: the two entries of the \(what) differ; type it again")
                }
            }
            throw CLIError.usage(
                "the two entries of the \(what) differed \(Self.confirmationAttempts) times: nothing was changed")
        }
    }

    /// The library's reader, its errors as the tool's: a file that cannot be used exits 66 (EX_NOINPUT),
    /// other refusals 64 (EX_USAGE); the message is the library's, which never repeats a path or name.
    private func library(_ source: FMDB.KeySource, what: String) throws -> KeyMaterial {
        do {
            return try KeyMaterial.read(from: source, describedAs: what) { warning in
                Output.message("fmdb-cipher: warning: " + warning)
            }
        } catch let error as FMDatabaseError {
            switch FMResultCode(rawValue: error.extendedCode) {
            case .cannotOpen, FMResultCode(rawValue: SQLITE_PERM): throw CLIError(error.message, code: Exit.noInput)
            case .misuse: throw CLIError.usage(error.message)
            default: throw error
            }
        }
    }
}

/// Whether an environment variable's name may be repeated in a message. A name with a variable's shape is
/// shown; anything else is not, since it may be the key itself given by mistake (`--key-env "$KEY"`).
enum EnvironmentName {
    /// The longest name said back; a raw key's 64 hexadecimal digits, or a 32-byte key in base32 or base64, is
    /// longer.
    static let longestShown = 32
    /// The longest name said back without a `_`: `K`, `DBKEY`. Longer single words (`PASSWORD1`, `HUNTER2`)
    /// are what a passphrase given by mistake looks like.
    static let longestWord = 5

    /// A name is said back when it has the shape environment variables are given by convention and a
    /// passphrase rarely has: upper-case letters, digits and `_`, starting with a letter or `_`, at most 32
    /// characters, with a `_` unless at most 5 characters long (`K`, `DBKEY`, `APP_DB_KEY`), and not 8 or
    /// more hexadecimal digits alone. Any lower-case letter (`hunter2`, `db_key`, base64) hides it.
    static func isShown(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        guard let first = scalars.first, scalars.count <= longestShown, isLetter(first) || first == "_",
            scalars.allSatisfy({ isLetter($0) || ("0"..."9").contains($0) || $0 == "_" })
        else { return false }
        if scalars.count >= 8, scalars.allSatisfy({ $0.properties.isASCIIHexDigit }) { return false }
        return scalars.count <= longestWord || name.contains("_")
    }

    /// An upper-case ASCII letter: the only letters a name said back may hold.
    private static func isLetter(_ scalar: Unicode.Scalar) -> Bool {
        ("A"..."Z").contains(scalar)
    }
}
