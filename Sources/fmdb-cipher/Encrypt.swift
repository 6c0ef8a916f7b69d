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
            format's defaults (--kdf, --page-size, --kdf-iter), the exact flags that open it are said on \
            standard error: the file does not record them.

            --kdf, --cipher-page-size and --kdf-iter describe DEST, the file the key opens: the same flags open \
            it afterwards (sql, info, export ...). --page-size is the old name of --cipher-page-size (deprecated).

            --kdf slot (or slot-raw) makes DEST a slotted database (see `fmdb-cipher keys`): a random data key, \
            slot 1 for the key given (a passphrase slot, KDF from --slot-kdf; or a raw-key slot), and with \
            --recovery a recovery-key slot whose key is printed once on standard output, as `keys recovery` \
            prints it. DEST-keyslots is written 0600 beside DEST (refused if it exists, unless --force), the copy \
            is verified through it, and it is moved into place before DEST.

            Examples:
              DB_KEY=... fmdb-cipher encrypt plain.db secret.db --key-env DB_KEY
              fmdb-cipher encrypt plain.db secret.db --key-file /run/secrets/db-key --kdf pbkdf2
              fmdb-cipher encrypt plain.db secret.db --key-env DB_KEY --cipher-page-size 4096   # open it with the same flags
              fmdb-cipher encrypt plain.db app.db --kdf slot --recovery --key-env ADMIN   # slotted, prints the recovery key
            """
    )

    @Argument(help: "The plaintext database to read.") var source: String
    @Argument(help: "The encrypted database to create.") var destination: String
    @OptionGroup var key: NewFileKeyOptions
    // The old name of --cipher-page-size (which, as --kdf and --kdf-iter, describes DEST: the file the key opens).
    @Option(name: .customLong("page-size"), help: .hidden)
    var deprecatedPageSize: Int?
    @Option(
        name: .customLong("unsafe-kdf-iter"),
        help: ArgumentHelp(
            "KDF iterations of the new file below the 64000 floor (weak: only for a reader that needs it).",
            valueName: "N"))
    var unsafeKDFIterations: Int?
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
            "When standard error is not a terminal, print progress lines on it: progress encrypt PERCENT BYTES TOTAL BYTES_PER_SECOND."
    )
    var progress = false

    func validate() throws {
        try Deprecation.check(key.cipherPageSize, "--cipher-page-size", old: deprecatedPageSize, oldName: "--page-size")
        if !key.kdf.opensSlot, recovery || slotKDF != nil {
            throw ValidationError("--recovery and --slot-kdf make a slotted database: add --kdf slot (or slot-raw)")
        }
    }

    func run() throws {
        try runReportingErrors {
            let settings = try KDFFloor.newFileSettings(
                pageSize: deprecatedPageSize ?? key.cipherPageSize,
                pageSizeOption: deprecatedPageSize == nil ? "--cipher-page-size" : "--page-size",
                iterations: key.kdfIterations, unsafeIterations: unsafeKDFIterations,
                option: "--kdf-iter", unsafeOption: "--unsafe-kdf-iter")
            let kind = try DatabaseFiles.requireInput(source)
            switch kind {
            case .plaintext: break
            case .empty: throw CLIError("\(source): is empty, not a database", code: Exit.wrongKey)
            default:
                throw CLIError(
                    "\(source): is not a plaintext SQLite database (already encrypted? use export)", code: Exit.wrongKey
                )
            }
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
            OpeningFlags.note(destination, kdf: key.kdf, settings: settings)
            if let recoveryKey { printRecoveryKey(recoveryKey.key, slot: recoveryKey.slot) }
        }
    }
}
