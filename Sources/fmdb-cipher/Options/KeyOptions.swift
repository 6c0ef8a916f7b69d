import ArgumentParser
import FMDB
import Foundation

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
