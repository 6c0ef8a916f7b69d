import ArgumentParser
import FMDB
import Foundation

struct KeysExportRaw: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-raw",
        abstract: "Print the data key (64 hex digits) for escrow or the sqlcipher shell: PRAGMA key = \"x'<hex>'\".",
        discussion: """
            Whoever holds the data key reads the database without any slot, and changing slots does not revoke it \
            (only rekey --data-key does). --output FILE writes it (and a newline) to FILE instead of standard \
            output: created 0600 in a private directory beside FILE, no link followed, refused if it exists \
            (exit 73) unless --force, and renamed into place only once written and synced (a shell redirection \
            would make it 0644 under the usual umask).
            """
    )

    @OptionGroup var slotted: SlotDatabaseOptions
    @Flag(
        name: .customLong("i-understand-this-reveals-the-data-key"),
        help: "Required: confirms that the data key is to be printed.")
    var confirmed = false
    @Option(
        help: ArgumentHelp(
            "Write the data key to FILE instead of standard output: created 0600, no link followed.",
            valueName: "FILE"))
    var output: String?
    @Flag(help: "With --output: replace FILE if it exists.") var force = false

    func validate() throws {
        guard confirmed else {
            throw ValidationError(
                "export-raw prints the database's data key in clear: add --i-understand-this-reveals-the-data-key")
        }
        if force, output == nil { throw ValidationError("--force goes with --output") }
    }

    func run() throws {
        try runReportingErrors {
            let secret = try slotted.unlockingSecret(KeyReader())
            let target = try output.map { try OutputFile($0, force: force, source: slotted.database) }
            var writeError: Int32?
            do {
                try KeySlots.withDataKeyHex(of: slotted.database, unlockingWith: secret) { hex in
                    guard let target else { return Output.secretLine(hex, what: "the data key") }
                    writeError = Output.writeAll(target.fd, hex)
                    if writeError == nil {
                        var newline = UInt8(ascii: "\n")
                        writeError = withUnsafeBytes(of: &newline) { Output.writeAll(target.fd, $0) }
                    }
                }
            } catch {
                throw CLIError.from(error, context: "keys export-raw \(slotted.database)")
            }
            if let target {
                if let writeError {
                    throw CLIError(
                        "cannot write the data key to \(target.destination): \(String(cString: strerror(writeError)))",
                        code: Exit.ioError)
                }
                try target.commit()
            }
        }
    }
}
