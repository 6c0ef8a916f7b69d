import ArgumentParser
import FMDB
import Foundation

/// `fmdb-cipher keys ...`: key slots (see `KeySlots` in the library).
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Key slots: several passphrases, raw keys and a recovery key for one database; change one in milliseconds.",
        discussion: """
            A slotted database is encrypted with a random data key that is never shown or stored in clear. \
            Each way to open it is a slot in DB-keyslots (keep it with the database: without it the database \
            cannot be opened). Changing a passphrase rewrites one slot, not the database. Every command opens a \
            slotted database through its slots without --kdf: the key is tried as a passphrase, a raw key and \
            a recovery key, in that order, against the slot kinds DB-keyslots holds. A slot's key is named \
            --kdf slot (a passphrase), slot-raw or slot-recovery, here and in the other commands; a new slot's \
            --new-kdf slot or slot-raw. \
            export and migrate (opened through a slot, no --new-key-*) and rekey --data-key --backup carry the \
            slot file to the copy; encrypt --kdf slot [--recovery] makes a slotted database from a plaintext one.

            Examples:
              fmdb-cipher keys init app.db --recovery                  # prompts for the first passphrase
              fmdb-cipher keys add app.db --key-env ADMIN --new-key-env OPS
              fmdb-cipher keys change app.db --key-env OLD --new-key-env NEW
              fmdb-cipher keys list app.db
              fmdb-cipher sql app.db --key-env OPS "SELECT count(*) FROM t"
              fmdb-cipher rekey --data-key app.db --key-env ADMIN --slot-key-file ops.pass --slot-key-file recovery.txt
            """,
        subcommands: [
            KeysInit.self, KeysAdd.self, KeysRecovery.self, KeysRemove.self, KeysList.self, KeysChange.self,
            KeysExportRaw.self,
        ]
    )
}

/// The KDF of new passphrase slots.
enum SlotKDF: String, ExpressibleByArgument, CaseIterable {
    /// scrypt N=2^15 r=8 p=1 (the default).
    case scrypt
    /// PBKDF2-HMAC-SHA512 x 256,000.
    case pbkdf2

    var kdf: KeySlotKDF {
        switch self {
        case .scrypt: return .scrypt()
        case .pbkdf2: return .pbkdf2SHA512()
        }
    }
}

extension KDF {
    /// The slot secret this kind of key is: a raw key, a recovery key, or (otherwise) a passphrase.
    func slotSecret(_ material: KeyMaterial) throws -> KeySlotSecret {
        if self == .raw || self == .slotRaw { return try KDF.rawKey { try .rawKey(material: material) } }
        do {
            switch self {
            case .slotRecovery: return try .recoveryKey(material: material)
            default: return .passphrase(material: material)
            }
        } catch {
            throw CLIError.usage((error as NSError).localizedDescription)
        }
    }
}

/// Options every slot change shares: the database and the key that unlocks one of its slots.
struct SlotDatabaseOptions: ParsableArguments {
    @Argument(help: "The slotted database.") var database: String
    @OptionGroup var key: SlotKeyOptions

    /// The unlocking secret: --kdf raw/slot-raw, slot-recovery, or a passphrase.
    func unlockingSecret(_ reader: KeyReader) throws -> KeySlotSecret {
        _ = try DatabaseFiles.requireInput(database)
        let material = try reader.read(key.source, what: "key of a slot of \(database)")
        return try key.kdf(opening: database, with: material).slotSecret(material)
    }
}

/// Reads the secret of a new slot (asked twice on a terminal): raw with --new-kdf slot-raw, else a passphrase.
private func newSlotSecret(_ options: NewSlotKeyOptions, reader: KeyReader, database: String) throws -> KeySlotSecret {
    let material = try reader.read(options.source, what: "new slot key for \(database)", confirm: true, newKey: true)
    let secret = try options.kdf.slotSecret(material)
    if secret.slotKind == .passphrase { warnIfShort(material) }
    return secret
}

/// The shortest passphrase a new slot gets without a warning, in bytes of UTF-8 (12 ASCII characters).
let minimumSlotPassphraseLength = 12

/// Warns (never refuses) when a new passphrase slot's passphrase is shorter than the documented minimum:
/// the slot's KDF slows each guess, not the number of guesses a short passphrase leaves.
func warnIfShort(_ material: KeyMaterial) {
    guard material.count < minimumSlotPassphraseLength else { return }
    Output.message(
        "fmdb-cipher: warning: the new passphrase is shorter than \(minimumSlotPassphraseLength) characters: "
            + "a short passphrase is guessed quickly whatever the slot's KDF; prefer a long one (or a raw key)")
}

extension CLIError {
    /// A slot change's error: a refused change (SQLITE_MISUSE: a secret that already opens a slot, no
    /// such slot, the last slot...) is a usage error; the rest as every command maps them.
    static func fromSlotChange(_ error: Error, context: String) -> CLIError {
        let ns = error as NSError
        if FMResultCode.misuse ~= error {
            return CLIError("\(context): \(ns.localizedDescription)", code: Exit.usage)
        }
        return from(error, context: context)
    }
}

/// Runs a slot change with the library's warnings printed on standard error: a change that took but may not
/// survive a power loss (its directory could not be synced), a rotation whose slot file stays pending.
func reportingSlotWarnings<T>(_ body: () throws -> T) rethrows -> T {
    try KeySlots.withWarningReceiver({ Output.message("fmdb-cipher: warning: \($0)") }, operation: body)
}

private func describe(_ slot: KeySlotInfo) -> String {
    "slot \(slot.id) (\(slot.kind.rawValue), \(slot.kdf))"
}

/// Writes a recovery key to standard output straight from wiped memory.
func printRecoveryKey(_ key: RecoveryKey, slot: KeySlotInfo) {
    Output.message("Recovery key for slot \(slot.id). It is shown only this once: write it down and keep it offline.")
    key.withFormattedText { text in
        Output.secretLine(text, what: "the recovery key")
    }
}

struct KeysInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a new encrypted database with a random data key and its first slot.",
        discussion: """
            The first slot's key comes from --key-env/--key-file/--key-stdin/--key-credential (or a prompt, twice); \
            --kdf slot-raw makes it a raw-key slot. A recovery step (--recovery) that fails after the database \
            was made exits 5: the database and its first slot work, and `keys recovery` adds the recovery slot.
            """
    )

    @Argument(help: "The database to create (must not exist).") var database: String
    @OptionGroup var key: FirstSlotKeyOptions
    @Option(
        name: .customLong("slot-kdf"),
        help: "The KDF of a passphrase slot: scrypt (N=2^15, default) or pbkdf2 (SHA-512 x 256,000).")
    var slotKDF: SlotKDF = .scrypt
    @Flag(help: "Also add a recovery-key slot and print the recovery key (once).") var recovery = false

    func run() throws {
        try runReportingErrors {
            // lstat, not fileExists: a symbolic link (even a dangling one) is "something there" too; the
            // library refuses it again when it creates the file (O_EXCL|O_NOFOLLOW, mode 0600).
            var existing = stat()
            if lstat(database, &existing) == 0 {
                throw CLIError(
                    "\(database): already exists (keys init creates a new database)", code: Exit.cannotCreate)
            }
            // A slot file already there is refused by the library (exit 73), unless it is what an interrupted
            // `keys init` of this path left (its database never appeared): then it is removed and init runs.
            let reader = KeyReader()
            let material = try reader.read(key.source, what: "key of the first slot of \(database)", confirm: true)
            let secret = try key.kdf.slotSecret(material)
            if secret.slotKind == .passphrase { warnIfShort(material) }
            let first: KeySlotInfo
            do {
                first = try reportingSlotWarnings {
                    try KeySlots.createDatabase(at: database, secret: secret, kdf: slotKDF.kdf)
                }
            } catch {
                let cli = CLIError.from(error, context: "keys init \(database)")
                throw cli.code == Exit.noInput ? CLIError(cli.message, code: Exit.cannotCreate) : cli
            }
            Output.message(
                "created \(database) with \(describe(first)); slots in "
                    + "\(KeySlots.slotFilePath(forDatabaseAt: database))"
            )
            if recovery {
                let added: (KeySlotInfo, RecoveryKey)
                do {
                    added = try reportingSlotWarnings {
                        try KeySlots.addRecoverySlot(to: database, unlockingWith: secret)
                    }
                } catch {
                    // The first step stands: say what there is, not only what failed, decided by opening the
                    // database through the first slot.
                    let cause = CLIError.from(error, context: "the recovery slot").message
                    do {
                        let db = try DatabaseFiles.open(
                            database, provider: KeySlotKeyProvider(secret: secret, logsRefusals: false), readOnly: true)
                        defer { db.close() }
                        let rows = try db.executeQuery("SELECT count(*) FROM sqlite_master", values: nil)
                        defer { rows.close() }
                        guard try rows.nextWithError() else { throw db.lastError() }
                    } catch {
                        let check = CLIError.from(error, context: "opening it through \(describe(first))").message
                        throw CLIError(
                            "keys init \(database): the database and \(describe(first)) were created, but there is no "
                                + "recovery slot (\(cause)), and whether the first slot opens the database could not "
                                + "be checked (\(check)): try `fmdb-cipher check \(database)` with the first slot's "
                                + "key",
                            code: Exit.ioError)
                    }
                    throw CLIError(
                        "keys init \(database): the database and \(describe(first)) were created and open, but there "
                            + "is no recovery slot (\(cause)); add one with `fmdb-cipher keys recovery \(database)`",
                        code: Exit.partlyDone)
                }
                printRecoveryKey(added.1, slot: added.0)
            }
        }
    }
}

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
            let newSecret = try newSlotSecret(newKey, reader: reader, database: slotted.database)
            do {
                let slot = try reportingSlotWarnings {
                    try KeySlots.addSlot(
                        to: slotted.database, unlockingWith: secret, newSecret: newSecret, kdf: slotKDF.kdf)
                }
                Output.message("added \(describe(slot))")
            } catch {
                throw CLIError.fromSlotChange(error, context: "keys add \(slotted.database)")
            }
        }
    }
}

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
                let (slot, key) = try reportingSlotWarnings {
                    try KeySlots.addRecoverySlot(to: slotted.database, unlockingWith: secret)
                }
                printRecoveryKey(key, slot: slot)
            } catch {
                throw CLIError.from(error, context: "keys recovery \(slotted.database)")
            }
        }
    }
}

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
                try reportingSlotWarnings {
                    try KeySlots.removeSlot(slot, from: slotted.database, unlockingWith: secret)
                }
                Output.message("removed slot \(slot)")
            } catch {
                throw CLIError.fromSlotChange(error, context: "keys remove \(slotted.database)")
            }
        }
    }
}

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
            let newSecret = try newSlotSecret(newKey, reader: reader, database: slotted.database)
            do {
                let slot = try reportingSlotWarnings {
                    try KeySlots.changeSlot(of: slotted.database, from: secret, to: newSecret, kdf: slotKDF.kdf)
                }
                Output.message("changed \(describe(slot))")
            } catch {
                throw CLIError.fromSlotChange(error, context: "keys change \(slotted.database)")
            }
        }
    }
}

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
            "rekey --data-key", totalBytes: Double(fileSize(database)), measure: RekeyProgress(database).measure)
        // The library's three outcomes, as plain rekey's: a throw is "not done" (the old data key still
        // opens the database; code 11 when neither does), .checkpointPending is done with the WAL
        // checkpoint to come (exit 3).
        let outcome: FMRekeyOutcome
        do {
            outcome = try reportingSlotWarnings {
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
