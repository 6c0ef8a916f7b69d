import ArgumentParser
import FMDB
import Foundation

/// `fmdb-cipher rekey --data-key`: a new random data key, every page re-encrypted, every slot re-wrapped.
enum DataKeyRotation {
    /// What was found when the key slot file beside `database` is not byte for byte the one saved beside
    /// `backup` (PATH-keyslots); nil when it is.
    static func slotFileChanged(_ database: String, savedIn backup: String) -> String? {
        let current = KeySlots.slotFilePath(forDatabaseAt: database)
        let saved = KeySlots.slotFilePath(forDatabaseAt: backup)
        guard let now = FileManager.default.contents(atPath: current) else {
            return "the key slot file \(current) could not be read"
        }
        guard let then = FileManager.default.contents(atPath: saved) else {
            return "the saved key slot file \(saved) could not be read"
        }
        guard now != then else { return nil }
        return "the key slot file \(current) is not the one saved in \(saved) (a pending rotation's wraps both data "
            + "keys, so a secret opening the database says nothing of which data key it is under)"
    }

    static func run(
        database: String, key: KeyOptions, slotKeyFiles: [String], dropOtherSlots: Bool, backup: String?, force: Bool,
        quiet: Bool, progressLines: Bool = false
    ) throws {
        _ = try DatabaseFiles.requireInput(database)
        let reader = KeyReader()
        let material = try reader.read(key.source, what: "key of a slot of \(database)")
        var secrets = [try key.slotKind(opening: database, with: material).slotSecret(material)]
        for file in slotKeyFiles {
            // The path is not repeated (it may be a secret typed where the path belongs): "the file given".
            let material = try reader.read(.file(file), what: "slot key in a file given to --slot-key-file")
            // A file may hold any kind of slot secret: try it as each kind that parses.
            secrets.append(.passphrase(material: material))
            if let raw = try? KeySlotSecret.rawKey(material: material) { secrets.append(raw) }
            if let recovery = try? KeySlotSecret.recoveryKey(material: material) { secrets.append(recovery) }
        }
        // A backup this run wrote is removed again if the rotation does not take: the retry is not refused for it.
        let written = backup.map { RekeyBackup($0, withSlots: true) }
        if let backup, let written {
            // The old database (old data key, old salt) and the old slot file beside it, before anything changes:
            // the old secrets open the backup.
            let provider = KeySlotKeyProvider(secret: secrets[0], logsRefusals: false)
            try DatabaseCopy(
                source: database, sourceProvider: provider, sourceSettings: key.settings,
                destination: backup, destinationProvider: provider, settings: key.settings,
                force: force, quiet: quiet, verb: "backup", slots: .source
            ).run()
            written.written()
            if !quiet {
                Output.message(
                    "backup written to \(backup) (its key slots in \(KeySlots.slotFilePath(forDatabaseAt: backup)))")
            }
        }
        let progress = ProgressReporter(quiet: quiet, lines: progressLines)
        progress.start(
            "rekey --data-key", totalBytes: Double(DatabaseFiles.fileSize(database)),
            measure: RekeyProgress(database).measure)
        // The library's three outcomes, as plain rekey's: a throw is "not done" (the old data key still
        // opens the database; code 11 when neither does), .checkpointPending is done with the WAL
        // checkpoint to come (exit 3).
        let outcome: FMRekeyOutcome
        do {
            outcome = try SlotChange.reportingWarnings {
                try KeySlots.rotateDataKey(of: database, secrets: secrets, droppingUnmatchedSlots: dropOtherSlots)
            }
        } catch let error as FMDatabaseError where error.rekeyOutcomeUnchecked {
            // The pending slot file (both data keys wrapped) stays: every kept slot opens the database whichever
            // key it is under, and the next slot change settles it.
            progress.finish("rekey --data-key: outcome not checked")
            throw CLIError(
                "rekey --data-key \(database): \(error.message) The key slot file wraps both data keys: every kept "
                    + "slot opens the database either way, and the next slot change (or rekey --data-key) settles it.",
                code: Exit.rekeyUnchecked
            )
        } catch {
            // Checked where anything depends on it (a backup to remove or keep; a SQLITE_CORRUPT), never inferred.
            // The first secret is checked through the slot file beside the database: only while that file is
            // the one saved in PATH-keyslots (the library restored it) does its opening the database say the
            // old data key does. A pending rotation's slot file wraps both data keys, and opens it under either.
            let slotsChanged = written.flatMap { $0.removable ? slotFileChanged(database, savedIn: $0.path) : nil }
            let oldKey =
                slotsChanged.map { KeyCheck.couldNotCheck($0) }
                ?? (written?.removable == true || FMResultCode.corrupt ~= error
                    ? Rekey.check(
                        database, with: KeySlotKeyProvider(secret: secrets[0], logsRefusals: false),
                        settings: key.settings)
                    : nil)
            switch oldKey {
            case .doesNotOpen: progress.finish("rekey --data-key: failed; the old data key does not open the database")
            case .couldNotCheck:
                progress.finish("rekey --data-key: failed; which data key opens the database could not be checked")
            case .opens, nil:
                progress.finish("rekey --data-key: failed; the database and its slots still use the old data key")
            }
            if let slotsChanged {
                written?.keep(because: slotsChanged)
            } else if let oldKey {
                written?.discardAfterFailedRekey(of: database, oldKey: oldKey)
            }
            throw CLIError.from(error, context: "rekey --data-key \(database)")
        }
        progress.finish("rekey --data-key: done", completed: true)
        if case .checkpointPending(let error) = outcome {
            throw CLIError(
                "rotated the data key of \(database): only the new data key opens it now, but the WAL checkpoint is "
                    + "pending (\(error.message)); pages under the old data key stay in the file until SQLite "
                    + "checkpoints it, when the last connection closes. Do not retry with a copy of the old data key: "
                    + "it no longer opens the database.",
                code: Exit.checkpointPending
            )
        }
        if !quiet {
            Output.message(
                "rotated the data key of \(database); slots: "
                    + "\(try KeySlots.list(forDatabaseAt: database).map { String($0.id) }.joined(separator: ", "))"
            )
        }
    }
}
