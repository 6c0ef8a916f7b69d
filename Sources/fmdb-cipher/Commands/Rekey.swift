import ArgumentParser
import FMDB
import Foundation

struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change the key of an encrypted database, safely.",
        discussion: """
            SQLCipher re-encrypts every page in one transaction. The tool waits up to --busy-timeout for other \
            connections, checks that the rekey took (SQLCipher 3.4.1 itself does not), verifies the new key on \
            a fresh connection and checkpoints the WAL, so no page under the old key stays behind. If anything \
            fails before the key changed the database still opens with the old key. --backup first writes a \
            verified encrypted copy (with the old key); when the rekey then does not take, that copy is removed \
            once the old key is checked to open every page of the database, so the same command can be retried \
            (kept when that cannot be checked, and when it replaced a file with --force).

            Progress: on a terminal, a bar with the percentage, throughput and time left (the pages SQLCipher \
            has written, in the rollback journal or WAL, against the database's size). With --progress and \
            standard error not a terminal, lines "progress rekey PERCENT BYTES TOTAL BYTES_PER_SECOND" \
            (integers): one at the start, about one a second, and one at 100 when the rekey is done; none at \
            100 means it was not.

            A new key that already opens the file with the same settings is refused (exit 64, nothing \
            written), decided by opening the file with it. A new --new-kdf is said back as the flags that open \
            the file from then on; --json prints one JSON object on standard output with them: {"path", \
            "open_with", "kdf", "format", "cipher_page_size", "kdf_iter", "key_slots"}.

            --data-key unlocks a key slot (no --kdf: the kind is found; or --kdf slot, slot-raw, slot-recovery); \
            --kdf pbkdf2, pbkdf2-sqlcipher or scrypt, and --new-kdf, are refused with it (exit 64). A single-key \
            database goes under key slots by a copy, not in place: export SRC DEST --new-kdf slot.

            Exit codes: 0 rekeyed; 75 busy and 74 I/O (not done: the old key still opens it); 3 rekeyed, but \
            the WAL checkpoint is pending (only the new key opens it; do not retry).

            Recovery after an interrupted rekey (killed, power loss): the rekey is one transaction, so the file \
            opens with exactly one of the two keys. Try `fmdb-cipher check DB` with the old key, then with the new.

            --data-key --backup PATH: before the rotation starts, PATH gets the database under its OLD data key \
            and salt, and PATH-keyslots a byte-for-byte copy of the OLD slot file (0600; refused if it exists, \
            unless --force): the old secrets open the backup, and keep opening it after the rotation (all of \
            them, also slots --drop-other-slots drops): to revoke a secret for good, destroy the backup too.

            Examples:
              OLD_KEY=... NEW_KEY=... fmdb-cipher rekey app.db --key-env OLD_KEY --new-key-env NEW_KEY \
            --backup app.db.bak
              printf '%s\\n%s\\n' "$OLD" "$NEW" | fmdb-cipher rekey app.db --key-stdin --new-key-stdin
            """
    )

    @Argument(help: "The encrypted database.") var database: String
    @OptionGroup var key: KeyOptions
    @OptionGroup var newKey: NewKeyOptions
    @Option(
        help: ArgumentHelp(
            "First write a verified encrypted copy (old key) here; with --data-key also PATH-keyslots (the old slots).",
            valueName: "PATH"))
    var backup: String?
    @Option(
        name: .customLong("busy-timeout"),
        help: ArgumentHelp("Seconds to wait for other connections' locks.", valueName: "SECONDS"))
    var busyTimeout: Double = 5
    @Flag(
        help:
            "Replace the --backup file and PATH-keyslots if they exist (without --data-key, PATH-keyslots is removed).")
    var force = false
    @Flag(help: "No progress output.") var quiet = false
    @Flag(
        help:
            """
            When standard error is not a terminal, print progress lines on it: progress rekey PERCENT BYTES TOTAL \
            BYTES_PER_SECOND.
            """
    )
    var progress = false
    @Flag(
        name: .customLong("data-key"),
        help: "Slotted database (keys): rotate the random data key; every slot is re-wrapped.")
    var dataKey = false
    @Option(
        name: .customLong("slot-key-file"),
        help: ArgumentHelp("With --data-key: a file with the key of another slot to keep (repeat).", valueName: "PATH"))
    var slotKeyFiles: [String] = []
    @Flag(name: .customLong("drop-other-slots"), help: "With --data-key: remove the slots no given key opens.")
    var dropOtherSlots = false
    @Flag(help: "Print one JSON object on standard output: the database, the flags that open it, its settings.")
    var json = false

    func validate() throws {
        guard busyTimeout >= 0, busyTimeout.isFinite else {
            throw ValidationError("--busy-timeout must be 0 or more seconds")
        }
        if dataKey, newKey.source != nil {
            throw ValidationError("--data-key makes a random new key: no --new-key-*")
        }
        if !dataKey, !slotKeyFiles.isEmpty || dropOtherSlots {
            throw ValidationError("--slot-key-file and --drop-other-slots go with --data-key")
        }
        // A rekey unlocks the slot file as a whole (every secret given is matched against every slot).
        if key.slotID != nil { throw ValidationError("rekey does not take --slot") }
        // --data-key unlocks a slot, whose own KDF derives the key: a single-key KDF names nothing there (a
        // slot's raw key is slot-raw, as in every command that opens a slot).
        if dataKey, [.raw, .pbkdf2, .pbkdf2Sqlcipher, .scrypt].contains(key.kdf) {
            throw ValidationError(
                "rekey --data-key unlocks a key slot: give no --kdf (the kind is found from the slot file), or "
                    + "--kdf slot, slot-raw or slot-recovery (--kdf \(key.kdf.rawValue) is a single-key database's)")
        }
        if dataKey, newKey.newKDF != nil {
            throw ValidationError("--data-key makes a random new data key: no --new-kdf")
        }
    }

    func run() throws {
        try runReportingErrors {
            if dataKey {
                try DataKeyRotation.run(
                    database: database, key: key, slotKeyFiles: slotKeyFiles, dropOtherSlots: dropOtherSlots,
                    backup: backup, force: force, quiet: quiet, progressLines: progress)
                if json {
                    try OpeningFlags.Written(path: database, kdf: .slot, settings: key.settings).printJSON()
                }
                return
            }
            if FileManager.default.fileExists(atPath: KeySlots.slotFilePath(forDatabaseAt: database)) {
                throw CLIError.usage(
                    "\(database) has key slots: change a slot with `keys change`, or rotate the data key with "
                        + "`rekey --data-key`"
                )
            }
            let kind = try DatabaseFiles.requireInput(database)
            switch kind {
            case .plaintext:
                throw CLIError(
                    "\(database): is a plaintext SQLite database (not encrypted), so there is no key to change: make "
                        + "an encrypted copy with `fmdb-cipher encrypt \(database) NEW.db`", code: Exit.wrongKey,
                    hintsKey: false)
            case .empty, .truncated: throw CLIError("\(database): is not a database", code: Exit.wrongKey)
            default: break
            }
            let reader = KeyReader()
            let oldMaterial = try reader.read(key.source, what: "current key for \(database)")
            let oldProvider = try key.kdf.provider(oldMaterial)
            let newMaterial = try reader.read(
                newKey.source, what: "new key for \(database)", confirm: true, newKey: true)
            let newKDF = newKey.newKDF?.kdf ?? key.kdf
            let newProvider = try newKDF.provider(newMaterial)
            // Decided by trying, not by comparing what was typed: keys from different sources (a variable and
            // a file), or a passphrase and the raw key it derives, may be the same key. A rekey to it would
            // re-encrypt every page and change nothing.
            if Self.opens(database, with: newProvider, settings: key.settings) {
                throw CLIError.usage(
                    "\(database): the new key already opens it, with the same settings: nothing to change (not rekeyed)"
                )
            }

            let progress = ProgressReporter(quiet: quiet, lines: self.progress)
            var format: CipherFormat?
            let rekeyStarting = { (opened: CipherFormat?) in
                format = opened
                progress.start(
                    "rekey", totalBytes: Double(DatabaseFiles.fileSize(database)),
                    measure: RekeyProgress(database).measure)
            }
            // The library's safe rekey: which key opens the file afterwards is checked on a fresh
            // connection, so a throw always means "not done, the old key still opens it".
            let outcome: FMRekeyOutcome
            // A backup this run wrote is removed again if the rekey does not take: the retry is not refused for it.
            let madeBackup = backup.map { RekeyBackup($0) }
            do {
                if let backup, let madeBackup {
                    outcome = try DatabaseCopy(
                        source: database, sourceProvider: oldProvider, sourceSettings: key.settings,
                        destination: backup, destinationProvider: oldProvider, settings: key.settings,
                        force: force, quiet: quiet, verb: "backup"
                    ).rekey(
                        from: oldProvider, to: newProvider, busyTimeout: busyTimeout, backupWritten: madeBackup.written,
                        rekeyStarting: rekeyStarting)
                } else {
                    let db = try DatabaseFiles.open(database, provider: oldProvider, settings: key.settings)
                    defer { db.close() }
                    rekeyStarting(db.cipherFormat)
                    outcome = try db.rekeySafely(using: newProvider, busyTimeout: busyTimeout)
                }
            } catch let error as CLIError {
                // Said already: the backup, or opening the database for the rekey.
                if let madeBackup, madeBackup.removable {
                    madeBackup.discardAfterFailedRekey(
                        of: database, oldKey: Self.check(database, with: oldProvider, settings: key.settings))
                }
                throw error
            } catch let error as FMDatabaseError where error.rekeyOutcomeUnchecked {
                // The backup stays: which key opens the database is not known.
                progress.finish("rekey: outcome not checked")
                throw CLIError(
                    "rekey \(database): \(error.message) (fmdb-cipher check \(database) with each key tells which.)",
                    code: Exit.rekeyUnchecked
                )
            } catch {
                // Which key opens the database is checked where anything depends on it (a backup to remove or
                // keep; a SQLITE_CORRUPT, after which the old key may not open it either), never inferred.
                let oldKey =
                    madeBackup?.removable == true || FMResultCode.corrupt ~= error
                    ? Self.check(database, with: oldProvider, settings: key.settings) : nil
                let neitherKey =
                    oldKey == .doesNotOpen
                    && Self.check(database, with: newProvider, settings: key.settings) == .doesNotOpen
                switch oldKey {
                case .doesNotOpen where neitherKey: progress.finish("rekey: failed; neither key opens the database")
                case .doesNotOpen: progress.finish("rekey: failed; the old key does not open the database")
                case .couldNotCheck:
                    progress.finish("rekey: failed; which key opens the database could not be checked")
                case .opens, nil: progress.finish("rekey: failed; the database still uses the old key")
                }
                if let oldKey { madeBackup?.discardAfterFailedRekey(of: database, oldKey: oldKey) }
                // A page that fails its check during the rekey: SQLCipher 3 and 4.6 say SQLITE_CORRUPT, 4.7 and
                // later "out of memory" (code 7) or an I/O error for the rest of that connection's life. Which it
                // is (damage, or a real failure) is checked on a fresh connection under the old key.
                if FMResultCode.outOfMemory ~= error || FMResultCode.ioError ~= error,
                    let damage = Self.damage(database, with: oldProvider, settings: key.settings)
                {
                    throw damage
                }
                throw CLIError.fromOpened(error, context: "rekey \(database)", keyed: true)
            }
            progress.finish("rekey: done", completed: true)
            // The connection is closed: its journal (or WAL) is gone; that removal reaches the disk now.
            if let reason = DatabaseFiles.syncDirectory(of: database) {
                Output.message(
                    "fmdb-cipher: warning: rekeyed \(database) (only the new key opens it now), but its directory "
                        + "could not be synced (\(reason)): a power loss before the file system is synced may roll "
                        + "the rekey back, and the old key open it again")
            }
            if case .checkpointPending(let error) = outcome {
                throw CLIError(
                    "rekeyed \(database): only the new key opens it now, but the WAL checkpoint is pending "
                        + "(\(error.message)); pages under the old key stay in the file until SQLite checkpoints it, "
                        + "when the last connection closes. Do not retry the rekey: the old key no longer opens the "
                        + "database.",
                    code: Exit.checkpointPending
                )
            }
            if !quiet { Output.message("rekeyed \(database)") }
            var settings = key.settings
            settings.format = format
            let written = OpeningFlags.Written(path: database, kdf: newKDF, settings: settings)
            written.note()
            if json { try written.printJSON() }
        }
    }

    /// What checking whether `provider` opens every page of `database` with `settings` found: a lock, an I/O
    /// error or a journal a read-only connection cannot recover is `.couldNotCheck`, never a no. A key that does
    /// not open the file is refused at its first page; the whole file is read only when the key opens it.
    static func check(_ database: String, with provider: any KeyProvider, settings: CipherSettings) -> KeyCheck {
        let db: FMDatabase
        do {
            db = try DatabaseFiles.open(database, provider: provider, settings: settings, readOnly: true)
        } catch {
            return KeyCheck(error, database)
        }
        defer { db.close() }
        do {
            return try DatabaseFiles.integrityCheck(db, quick: true).isEmpty ? .opens : .doesNotOpen
        } catch {
            return KeyCheck(error, database)
        }
    }

    /// The damage a fresh read-only connection under `provider` finds in `database` (exit 2, naming the first
    /// damaged page), or nil when the key opens every page or the check could not run.
    static func damage(_ database: String, with provider: any KeyProvider, settings: CipherSettings) -> CLIError? {
        guard let db = try? DatabaseFiles.open(database, provider: provider, settings: settings, readOnly: true) else {
            return nil
        }
        defer { db.close() }
        guard let problems = try? DatabaseFiles.integrityCheck(db, quick: true), !problems.isEmpty else { return nil }
        let cause = FMDatabaseError(code: SQLITE_CORRUPT, message: "integrity check: \(problems[0])")
        return CLIError.fromOpened(cause, context: "rekey \(database)", keyed: true, db: db)
    }

    /// Whether `provider` opens `database` with `settings`, every page of it (a failure to check counts as no:
    /// the rekey then reports what stands in its way, a damaged file as damaged).
    static func opens(_ database: String, with provider: any KeyProvider, settings: CipherSettings) -> Bool {
        check(database, with: provider, settings: settings) == .opens
    }
}
