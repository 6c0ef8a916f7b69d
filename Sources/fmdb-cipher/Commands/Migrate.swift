import ArgumentParser
import FMDB
import Foundation

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upgrade a SQLCipher 1, 2 or 3 database to SQLCipher 4's format, in place or into DEST.",
        discussion: """
            Needs SQLCipher 4 linked (fmdb-cipher --version says which). SRC's format is found with its key, \
            the contents are copied with sqlcipher_export into a temporary file beside the target in SQLCipher \
            4's format under the same key (a passphrase gets SQLCipher 4's KDF), verified (integrity check, \
            same tables and row counts) and renamed into place: SRC is intact on any failure. In place, SRC is \
            replaced only when no other process has it open (exit 75, naming the process), and SRC's write lock \
            is held from before the copy until it is replaced, so no write can land in between. \
            The journal mode is not copied: set PRAGMA journal_mode = WAL again if the application used it. \
            A key used with another --kdf than passphrase is said back as the flags that open the upgraded file \
            (standard error); --json prints one JSON object on standard output with them: {"path", "open_with", \
            "kdf", "format", "cipher_page_size", "kdf_iter", "key_slots"}.

            A slotted SRC (keys) is opened through a slot (found without --kdf, or --kdf slot, slot-raw or \
            slot-recovery; other --kdf values are refused, exit 64) and keeps its data key and salt: its slot file \
            opens the upgraded file (checked before the rename). In place, SRC-keyslots stays as it is, locked (as \
            keys and rekey --data-key lock it) from the copy until SRC is replaced; into DEST it is copied byte for \
            byte to DEST-keyslots (0600; refused if it exists, unless --force), which is moved into place before DEST.

            Examples:
              DB_KEY=... fmdb-cipher migrate app.db --key-env DB_KEY
              fmdb-cipher migrate old.db new.db --key-file key.txt
              fmdb-cipher migrate app.db --kdf slot --key-env OPS            # slotted: its slots keep working
            """
    )

    @Argument(help: "The encrypted database to upgrade.") var source: String
    @Argument(help: "Write the upgraded database here instead of replacing SRC.") var destination: String?
    @OptionGroup var key: KeyOptions
    @Flag(help: "Replace DEST and DEST-keyslots if they exist (a copy without slots removes DEST-keyslots).")
    var force = false
    @Flag(help: "No progress output.") var quiet = false
    @Flag(
        help:
            """
            When standard error is not a terminal, print progress lines on it: progress migrate PERCENT BYTES TOTAL \
            BYTES_PER_SECOND.
            """
    )
    var progress = false
    @Flag(help: "Print one JSON object on standard output: the upgraded file, the flags that open it, its settings.")
    var json = false

    func run() throws {
        try runReportingErrors {
            guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
                throw CLIError.usage(
                    "migrate writes SQLCipher 4 files, which the linked SQLCipher \(FMDBCipherVersion.sqlcipher) "
                        + "cannot write. To install an fmdb-cipher that writes them on this system, from the "
                        + "fmdb-cipher source tree: Scripts/install --sqlcipher 4"
                )
            }
            let kind = try DatabaseFiles.requireInput(source)
            switch kind {
            case .plaintext:
                throw CLIError(
                    "\(source): is a plaintext SQLite database (not encrypted): make an encrypted copy with "
                        + "`fmdb-cipher encrypt \(source) NEW.db`", code: Exit.wrongKey, hintsKey: false)
            case .empty, .truncated: throw CLIError("\(source): is not a database", code: Exit.wrongKey)
            default: break
            }
            // A slotted SRC keeps its identity (data key and salt): its slot file opens the upgraded copy too.
            let slotPath = KeySlots.slotFilePath(forDatabaseAt: source)
            var slotStatus = stat()
            let slotted = lstat(slotPath, &slotStatus) == 0
            let material = try KeyReader().read(key.source, what: "key for \(source)")
            let (kdf, provider) = try key.opening(source, with: material)
            if slotted, !kdf.opensSlot {
                throw CLIError.usage(
                    "\(source) has key slots (\(slotPath)): open it through one (no --kdf, or --kdf slot, slot-raw or "
                        + "slot-recovery) so they are carried; under another key the upgraded file would get a new "
                        + "salt and no slot would open it"
                )
            }
            let copy = DatabaseCopy(
                source: source, sourceProvider: provider, sourceSettings: key.settings,
                destination: destination ?? source, destinationProvider: provider,
                settings: CipherSettings(format: .v4), force: force, quiet: quiet, verb: "migrate",
                progressLines: progress)
            // The library's migration (verified, atomic, SRC intact on any failure; a slotted SRC keeps its slots).
            let found = try copy.perform { onStage in
                if let destination {
                    return try FMDatabaseCopy.migrate(
                        source, keyProvider: provider, settings: key.settings, to: destination,
                        replacingExisting: force, onStage: onStage)
                }
                return try FMDatabaseCopy.migrateInPlace(
                    source, keyProvider: provider, settings: key.settings, onStage: onStage)
            }
            let written = OpeningFlags.Written(
                path: destination ?? source, kdf: kdf, settings: CipherSettings(format: .v4))
            let report = found
            guard let report else {
                if !quiet { Output.message("\(source) is already in SQLCipher 4's format: nothing to do") }
                var settings = key.settings
                settings.format = .v4
                if json { try OpeningFlags.Written(path: source, kdf: kdf, settings: settings).printJSON() }
                return
            }
            if let notSynced = report.replacementNotSynced {
                Output.message("fmdb-cipher: warning: \(notSynced.message)")
            }
            if !quiet {
                let from = report.sourceFormat?.description ?? "SQLCipher"
                Output.message("migrated \(source) (\(from)) → \(destination ?? source) (SQLCipher 4)")
            }
            written.note()
            if json { try written.printJSON() }
        }
    }
}
