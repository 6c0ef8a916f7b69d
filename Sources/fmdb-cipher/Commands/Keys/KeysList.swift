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
            let formatter = ISO8601DateFormatter()
            if json {
                try Output.json(
                    slots.map { slot -> [String: Any] in
                        [
                            "id": slot.id, "kind": slot.kind.rawValue, "kdf": slot.kdf,
                            "created": formatter.string(from: slot.created),
                        ]
                    })
            } else {
                let rows = slots.map { [String($0.id), $0.kind.rawValue, $0.kdf, formatter.string(from: $0.created)] }
                RowFormat.table(columns: ["id", "kind", "kdf", "created"], rows: rows).forEach(Output.line)
            }
        }
    }
}
