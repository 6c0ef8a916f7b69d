import ArgumentParser
import FMDB
import Foundation

struct KeysList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the slots: ids, kinds, KDFs, creation times. No key needed; no secret shown."
    )

    @Argument(help: "The slotted database.") var database: String
    @Flag(help: "JSON output.") var json = false

    func run() throws {
        try runReportingErrors {
            // The database is named first: "no slot file" beside a mistyped path would send the operator
            // looking for the wrong file.
            var status = stat()
            if lstat(database, &status) != 0 {
                let slotPath = KeySlots.slotFilePath(forDatabaseAt: database)
                throw CLIError(
                    SlotDiscovery.hasSlotFile(database)
                        ? "\(database): no such file (the key slot file \(slotPath) is there without its database)"
                        : "\(database): no such file",
                    code: Exit.noInput)
            }
            let slots: [KeySlotInfo]
            do {
                slots = try KeySlots.list(forDatabaseAt: database)
            } catch {
                throw CLIError.from(error, context: "keys list \(database)")
            }
            try Output.report(KeySlotListReport(slots), json: json)
        }
    }
}
