import ArgumentParser
import FMDB
import Foundation

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
