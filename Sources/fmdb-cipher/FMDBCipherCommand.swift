import ArgumentParser
import FMDB
import Foundation

@main
struct FMDBCipherCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fmdb-cipher",
        abstract:
            "Encrypted SQLite (SQLCipher) databases from scripts: rekey, encrypt, decrypt, export, inspect, check, "
            + "query.",
        discussion: """
            Keys are never taken on the command line (every user on the machine can read it). Give them \
            with --key-env VAR, --key-file PATH, --key-stdin or --key-credential NAME (a systemd credential, \
            $CREDENTIALS_DIRECTORY/NAME) (and --new-key-env, --new-key-file, --new-key-stdin for a new key); \
            with none of these and a terminal, you are prompted.

            One flag language: --kdf says how the key given with --key-* is used, --new-kdf how the one given \
            with --new-key-* is; --cipher-page-size and --kdf-iter describe the file a command reads, \
            --new-cipher-page-size and --new-kdf-iter the file it writes (encrypt's DEST as export's). A command \
            that writes a file whose settings are not its format's defaults says the flags that open it on \
            standard error; encrypt, export, migrate and rekey with --json print one JSON object with them \
            (open_with) on standard output.

            The full meaning of each exit code: the article "The fmdb-cipher tool" (Exit codes) and the man page \
            (EXIT STATUS).

            """ + "\n" + Exit.helpText,
        version:
            "fmdb-cipher \(FMDBCipherVersion.string) (FMDB API \(FMDatabase.fmdbUserVersion()), SQLCipher "
            + "\(FMDBCipherVersion.sqlcipher), SQLite \(FMDatabase.sqliteLibVersion()))",
        subcommands: [
            Rekey.self, Encrypt.self, Decrypt.self, Export.self, Migrate.self, Info.self, Check.self, SQL.self,
            Keys.self,
        ]
    )

    /// Turns core dumps off before anything else, then parses and runs; a usage error never repeats a
    /// value from the command line (it may be a key typed in the wrong place).
    static func main() {
        ProcessHardening.disableCoreDumps()
        ProcessHardening.installCleanupHandlers()
        // A reader that went away (`| head`) is an output error the command reports (exit 74, and a
        // recovery key said not shown), not a signal that kills it before it can say so.
        signal(SIGPIPE, SIG_IGN)
        do {
            var command = try parseAsRoot(nil)
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .success { exit(withError: error) }
            let arguments = Array(CommandLine.arguments.dropFirst())
            if code.rawValue == Exit.usage, let suggestion = CommandSuggestion.message(for: arguments, root: self) {
                Output.message("fmdb-cipher: " + suggestion)
                Foundation.exit(code.rawValue)
            }
            let message = ProcessHardening.redacted(
                fullMessage(for: error), arguments: arguments, keeping: commandNames)
            if !message.isEmpty { Output.message(oneStyle(message)) }
            Foundation.exit(code.rawValue)
        }
    }
}

extension FMDBCipherCommand {
    /// The subcommand names and "help": words a usage error may repeat.
    static var commandNames: Set<String> { Set(configuration.subcommands.map { $0._commandName } + ["help"]) }

    /// swift-argument-parser's "Error: what" in the tool's own style, "fmdb-cipher: what", so every error
    /// a script sees starts the same way.
    static func oneStyle(_ message: String) -> String {
        message.hasPrefix("Error: ") ? "fmdb-cipher: " + message.dropFirst("Error: ".count) : message
    }
}
