import ArgumentParser
import FMDB
import Foundation

struct KeysAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a slot: a new passphrase (or raw key with --new-kdf slot-raw) that opens the database.",
        discussion: """
            A secret that already opens a slot is refused (exit 64). A passphrase shorter than 12 bytes of UTF-8 \
            (12 ASCII characters) gets a warning on standard error, and the slot is made.
            """
    )

    @OptionGroup var slotted: SlotDatabaseOptions
    @OptionGroup var newKey: NewSlotKeyOptions
    @Option(name: .customLong("slot-kdf"), help: "The KDF of a passphrase slot: scrypt (default) or pbkdf2.")
    var slotKDF: SlotKDF = .scrypt

    func run() throws {
        try runReportingErrors {
            let reader = KeyReader()
            let secret = try slotted.unlockingSecret(reader)
            let newSecret = try SlotChange.newSecret(newKey, reader: reader, database: slotted.database)
            do {
                let slot = try SlotChange.reportingWarnings {
                    try KeySlots.addSlot(
                        to: slotted.database, unlockingWith: secret, newSecret: newSecret, kdf: slotKDF.kdf)
                }
                Output.message("added \(SlotChange.describe(slot))")
            } catch {
                throw CLIError.fromSlotChange(error, context: "keys add \(slotted.database)")
            }
        }
    }
}
