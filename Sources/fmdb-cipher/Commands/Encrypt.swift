import ArgumentParser
import FMDB
import Foundation

struct Encrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encrypt a plaintext SQLite database into a new encrypted one.",
        discussion: """
            The copy is written to a temporary file beside DEST, verified (integrity check, same tables and \
            row counts) and renamed into place, so an interrupted run never leaves a half file at DEST. \
            user_version and application_id are copied. SRC is not changed. When DEST's settings are not its \
            format's defaults (--kdf, --new-cipher-page-size, --new-kdf-iter), the exact flags that open it are \
            said on standard error (with --json, in the JSON object's open_with): the file does not record them.

            One flag language: --kdf says how the key given (--key-*) is used, here as in every command, and the \
            same --kdf opens DEST. The settings of the file a command writes are --new-…: --new-cipher-page-size \
            and --new-kdf-iter here, as in export; DEST opens afterwards with the same values as --cipher-page-size \
            and --kdf-iter (sql, info, export ...).

            --kdf slot (or slot-raw) makes DEST a slotted database (see `fmdb-cipher keys`): a random data key, \
            slot 1 for the key given (a passphrase slot, KDF from --slot-kdf; or a raw-key slot), and with \
            --recovery a recovery-key slot whose key is printed once on standard output, as `keys recovery` \
            prints it (with --json, as the object's recovery_key: the object is then a secret). DEST-keyslots is \
            written 0600 beside DEST (refused if it exists, unless --force), the copy is verified through it, \
            and it is moved into place before DEST.

            --json prints one JSON object on standard output once DEST is in place: {"path": DEST, "open_with": \
            [the flags besides the key that open it], "kdf": ..., "format": ..., "cipher_page_size": ..., \
            "kdf_iter": ..., "key_slots": DEST-keyslots or null}.

            Examples:
              DB_KEY=... fmdb-cipher encrypt plain.db secret.db --key-env DB_KEY
              fmdb-cipher encrypt plain.db secret.db --key-file /run/secrets/db-key --kdf pbkdf2
              fmdb-cipher encrypt plain.db secret.db --key-env DB_KEY --new-cipher-page-size 8192   \
            # open with --cipher-page-size 8192
              fmdb-cipher encrypt plain.db app.db --kdf slot --recovery --key-env ADMIN   \
            # slotted, prints the recovery key
            """
    )

    @Argument(help: "The plaintext database to read.") var source: String
    @Argument(help: "The encrypted database to create.") var destination: String
    @OptionGroup var key: NewFileKeyOptions
    @Option(
        name: .customLong("unsafe-new-kdf-iter"),
        help: ArgumentHelp(
            "KDF iterations of DEST below the 64000 floor (weak: only for a reader that needs it).", valueName: "N"))
    var unsafeNewKDFIterations: Int?
    @Option(
        name: .customLong("slot-kdf"),
        help: "With --kdf slot: the KDF of the passphrase slot, scrypt (N=2^15, default) or pbkdf2 (SHA-512 x 256,000)."
    )
    var slotKDF: SlotKDF?
    @Flag(help: "With --kdf slot or slot-raw: also add a recovery-key slot and print the recovery key (once).")
    var recovery = false
    @Flag(help: "Replace DEST and DEST-keyslots if they exist (without --kdf slot*, DEST-keyslots is removed).")
    var force = false
    @Flag(help: "No progress output.") var quiet = false
    @Flag(
        help:
            """
            When standard error is not a terminal, print progress lines on it: progress encrypt PERCENT BYTES TOTAL \
            BYTES_PER_SECOND.
            """
    )
    var progress = false
    @Flag(help: "Print one JSON object on standard output: DEST, the flags that open it, its settings.")
    var json = false

    func validate() throws {
        if !key.kdf.opensSlot, recovery || slotKDF != nil {
            throw ValidationError("--recovery and --slot-kdf make a slotted database: add --kdf slot (or slot-raw)")
        }
    }

    func run() throws {
        try runReportingErrors {
            let floorSettings = try KDFFloor.newFileSettings(
                pageSize: key.pageSize.value, pageSizeOption: key.pageSize.option,
                iterations: key.iterations.value,
                unsafeIterations: unsafeNewKDFIterations,
                option: key.iterations.option, unsafeOption: "--unsafe-new-kdf-iter")
            let settings = try key.choices.settings(floorSettings)
            let kind = try DatabaseFiles.requireInput(source)
            switch kind {
            case .plaintext: break
            case .empty: throw CLIError("\(source): is empty, not a database", code: Exit.wrongKey)
            default:
                throw CLIError(
                    "\(source): is not a plaintext SQLite database (already encrypted? use export)", code: Exit.wrongKey
                )
            }
            WeakCipherWarning.warn(settings, file: destination)
            let material = try KeyReader().read(key.source, what: "key for \(destination)", confirm: true)
            let provider = try key.kdf.provider(material)
            // Slotted: a new slot file beside the new file, whose identity the KeySlotKeyProvider gives it.
            let slots: FMDatabaseCopy.SlotFile =
                key.kdf.opensSlot
                ? .new(try key.kdf.slotSecret(material), kdf: (slotKDF ?? .scrypt).kdf, addingRecoveryKey: recovery)
                : .none
            let recoveryKey = try DatabaseCopy(
                source: source, sourceProvider: nil, sourceSettings: CipherSettings(),
                destination: destination, destinationProvider: provider,
                settings: settings,
                force: force, quiet: quiet, verb: "encrypt", slots: slots, progressLines: progress
            ).run()
            if !quiet {
                let slotted =
                    !key.kdf.opensSlot
                    ? "" : " (slotted: key slots in \(KeySlots.slotFilePath(forDatabaseAt: destination)))"
                Output.message("encrypted \(source) → \(destination)\(slotted)")
            }
            let written = OpeningFlags.Written(path: destination, kdf: key.kdf, settings: settings)
            try written.report(json: json, recovery: recoveryKey)
        }
    }
}
