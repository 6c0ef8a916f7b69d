import ArgumentParser
import FMDB
import Foundation

struct KeysRemove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a slot (never the last). The key given must open some slot (it may be the one removed)."
    )

    @OptionGroup var slotted: SlotDatabaseOptions
    @Option(help: ArgumentHelp("The id of the slot to remove (see keys list).", valueName: "ID")) var slot: Int

    func run() throws {
        try runReportingErrors {
            let secret = try slotted.unlockingSecret(KeyReader())
            do {
                try SlotChange.reportingWarnings {
                    try KeySlots.removeSlot(slot, from: slotted.database, unlockingWith: secret)
                }
                Output.message("removed slot \(slot)")
            } catch {
                throw CLIError.fromSlotChange(error, context: "keys remove \(slotted.database)")
            }
        }
    }
}
