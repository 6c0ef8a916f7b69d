import ArgumentParser
import FMDB
import Foundation

struct KeysChange: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change",
        abstract:
            "Change the secret of the slot the current key opens (one KDF and one small file write; no page is "
            + "rewritten).",
        discussion: """
            The old key stops opening the database. It does not protect against someone who kept a copy of \
            the old DB-keyslots and knows the old key: they can still unwrap the data key from that copy. \
            Use `fmdb-cipher rekey --data-key` when that matters.
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
                    try KeySlots.changeSlot(of: slotted.database, from: secret, to: newSecret, kdf: slotKDF.kdf)
                }
                Output.message("changed \(SlotChange.describe(slot))")
            } catch {
                throw CLIError.fromSlotChange(error, context: "keys change \(slotted.database)")
            }
        }
    }
}
