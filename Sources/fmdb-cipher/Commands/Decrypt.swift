import ArgumentParser
import FMDB
import Foundation

struct Decrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decrypt an encrypted database into a new plaintext SQLite database.",
        discussion: """
            Written to a temporary file beside DEST, verified and renamed into place; SRC is not changed. \
            The result is readable by anyone who can read the file.

            Example:
              DB_KEY=... fmdb-cipher decrypt secret.db plain.db --key-env DB_KEY
            """
    )

    @Argument(help: "The encrypted database to read.") var source: String
    @Argument(help: "The plaintext database to create.") var destination: String
    @OptionGroup var key: KeyOptions
    @Flag(help: "Replace DEST if it exists; a DEST-keyslots beside it is removed (said on standard error).") var force =
        false
    @Flag(help: "No progress output.") var quiet = false
    @Flag(
        help:
            """
            When standard error is not a terminal, print progress lines on it: progress decrypt PERCENT BYTES TOTAL \
            BYTES_PER_SECOND.
            """
    )
    var progress = false

    func run() throws {
        try runReportingErrors {
            let kind = try DatabaseFiles.requireInput(source)
            if kind == .plaintext {
                throw CLIError(
                    "\(source): is already a plaintext SQLite database (not encrypted): nothing to decrypt; "
                        + "`cp` copies it", code: Exit.wrongKey, hintsKey: false)
            }
            let material = try KeyReader().read(key.source, what: "key for \(source)")
            let provider = try key.provider(opening: source, with: material)
            try DatabaseCopy(
                source: source, sourceProvider: provider, sourceSettings: key.settings,
                destination: destination, destinationProvider: nil, settings: CipherSettings(),
                force: force, quiet: quiet, verb: "decrypt", progressLines: progress
            ).run()
            if !quiet { Output.message("decrypted \(source) → \(destination)") }
        }
    }
}
