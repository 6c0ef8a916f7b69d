import ArgumentParser
import FMDB
import Foundation

struct KeysRecovery: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recovery",
        abstract: "Add a recovery-key slot and print the generated recovery key (once) on standard output."
    )

    @OptionGroup var slotted: SlotDatabaseOptions

    func run() throws {
        try runReportingErrors {
            let secret = try slotted.unlockingSecret(KeyReader())
            do {
                let (slot, key) = try SlotChange.reportingWarnings {
                    try KeySlots.addRecoverySlot(to: slotted.database, unlockingWith: secret)
                }
                SlotChange.printRecoveryKey(key, slot: slot)
            } catch {
                throw CLIError.from(error, context: "keys recovery \(slotted.database)")
            }
        }
    }
}
