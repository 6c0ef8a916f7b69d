import ArgumentParser
import FMDB
import Foundation

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
            if secret.slotKind == .passphrase { SlotChange.warnIfShort(material) }
            let first: KeySlotInfo
            do {
                first = try SlotChange.reportingWarnings {
                    try KeySlots.createDatabase(at: database, secret: secret, kdf: slotKDF.kdf)
                }
            } catch {
                let cli = CLIError.from(error, context: "keys init \(database)")
                throw cli.code == Exit.noInput ? CLIError(cli.message, code: Exit.cannotCreate) : cli
            }
            let named = SlotChange.describe(first)
            Output.message(
                "created \(database) with \(named); slots in "
                    + "\(KeySlots.slotFilePath(forDatabaseAt: database))"
            )
            if recovery {
                let added: (KeySlotInfo, RecoveryKey)
                do {
                    added = try SlotChange.reportingWarnings {
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
                        let check = CLIError.from(error, context: "opening it through \(named)").message
                        throw CLIError(
                            "keys init \(database): the database and \(named) were created, but there is no "
                                + "recovery slot (\(cause)), and whether the first slot opens the database could not "
                                + "be checked (\(check)): try `fmdb-cipher check \(database)` with the first slot's "
                                + "key",
                            code: Exit.ioError)
                    }
                    throw CLIError(
                        "keys init \(database): the database and \(named) were created and open, but there "
                            + "is no recovery slot (\(cause)); add one with `fmdb-cipher keys recovery \(database)`",
                        code: Exit.partlyDone)
                }
                SlotChange.printRecoveryKey(added.1, slot: added.0)
            }
        }
    }
}
