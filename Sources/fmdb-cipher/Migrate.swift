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
            The journal mode is not copied: set PRAGMA journal_mode = WAL again if the application used it.

            A slotted SRC (keys) is opened through a slot (found without --kdf, or --kdf slot, slot-raw or \
            slot-recovery; other --kdf values are refused, exit 64) and keeps its data key and salt: its slot file opens the upgraded file (checked \
            before the rename). In place, SRC-keyslots stays as it is, locked (as keys and rekey --data-key lock \
            it) from the copy until SRC is replaced; into DEST it is copied byte for byte to \
            DEST-keyslots (0600; refused if it exists, unless --force), which is moved into place before DEST.

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

    /// Refuses (exit 75) when another process has SRC open: after the rename it would go on writing to the
    /// replaced file, and every write it acknowledged from then on would be lost. Other users' processes,
    /// whose descriptors cannot be read without privilege, matter only when SRC is writable by others:
    /// then "could not check" refuses too.
    /// fsync of the directory holding `path`; false when it failed.
    static func syncDirectory(of path: String) -> Bool {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fsync(fd) == 0
    }

    func refuseIfOpenElsewhere() throws {
        var status = stat()
        guard let open = OpenElsewhere.check(source), stat(source, &status) == 0,
            open.unreadable == 0 || (status.st_mode & 0o022) == 0
        else {
            throw CLIError(
                "cannot check whether another process has \(source) open: not replaced; migrate into a new "
                    + "file (fmdb-cipher migrate SRC DEST) instead", code: Exit.busy)
        }
        if !open.holders.isEmpty {
            let pids = open.holders.prefix(5).map(String.init).joined(separator: ", ")
            throw CLIError(
                "\(source) is open in another process (pid \(pids)): not replaced; stop it and try again, "
                    + "or migrate into a new file (fmdb-cipher migrate SRC DEST)", code: Exit.busy)
        }
    }

    func run() throws {
        try runReportingErrors {
            guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
                throw CLIError.usage(
                    "migrate writes SQLCipher 4 files, which the linked SQLCipher \(FMDBCipherVersion.sqlcipher) cannot write: "
                        + "install SQLCipher 4 (see README, \"Supported SQLCipher\")"
                )
            }
            let kind = try DatabaseFiles.requireInput(source)
            switch kind {
            case .plaintext:
                throw CLIError("\(source): is a plaintext database, not SQLCipher: use encrypt", code: Exit.wrongKey)
            case .empty, .truncated: throw CLIError("\(source): is not a database", code: Exit.wrongKey)
            default: break
            }
            // A slotted SRC keeps its identity (data key and salt): its slot file opens the upgraded copy too.
            let slotPath = KeySlots.slotFilePath(forDatabaseAt: source)
            var slotStatus = stat()
            let slotted = lstat(slotPath, &slotStatus) == 0
            let material = try KeyReader().read(key.source, what: "key for \(source)")
            let kdf = key.kdf(opening: source, with: material)
            if slotted, !kdf.opensSlot {
                throw CLIError.usage(
                    "\(source) has key slots (\(slotPath)): open it through one (no --kdf, or --kdf slot, slot-raw or slot-recovery) so "
                        + "they are carried; under another key the upgraded file would get a new salt and no slot would open it"
                )
            }
            let provider = try kdf.provider(material)
            // In place, a process that has SRC open is said at once (no key is read, no lock waited for).
            if destination == nil { try refuseIfOpenElsewhere() }
            // In place, this connection holds SRC's write lock from before the copy until after the rename, so
            // no other connection commits a write the copy would not hold.
            let holder = try DatabaseFiles.open(
                source, provider: provider, settings: key.settings, readOnly: destination != nil)
            defer { holder.close() }
            let current = holder.cipherFormat
            if current == .v4, destination == nil {
                if !quiet { Output.message("\(source) is already in SQLCipher 4's format: nothing to do") }
                return
            }
            // A WAL source is switched to a rollback journal first (the upgraded copy has one too): the holding
            // connection, closing on the replaced inode after the rename, must not checkpoint and delete a
            // `-wal` that by then belongs to the new file. Put back when the source stays.
            var switchedFromWAL = false
            if destination == nil {
                try refuseIfOpenElsewhere()
                do {
                    if holder.string(forQuery: "PRAGMA journal_mode")?.lowercased() == "wal" {
                        guard holder.string(forQuery: "PRAGMA journal_mode = DELETE")?.lowercased() == "delete" else {
                            throw CLIError(
                                "\(source) is in WAL mode and could not leave it (another connection is reading?): "
                                    + "not replaced; try again", code: Exit.busy)
                        }
                        switchedFromWAL = true
                    }
                    try holder.executeUpdate("BEGIN IMMEDIATE", values: nil)
                } catch {
                    throw CLIError.from(error, context: source)
                }
            }
            var committed = false
            defer {
                if destination == nil, holder.isInTransaction { holder.rollback() }
                if switchedFromWAL, !committed { _ = holder.string(forQuery: "PRAGMA journal_mode = WAL") }
            }
            let target = destination ?? source
            // In place, the copy goes to a staging file first: DatabaseCopy never writes over its SRC.
            let staged =
                destination == nil
                ? URL(fileURLWithPath: source).deletingLastPathComponent()
                    .appendingPathComponent(
                        ".\(URL(fileURLWithPath: source).lastPathComponent).fmdb-cipher-migrate-\(UUID().uuidString.prefix(8))"
                    ).path
                : target
            defer { if !committed, destination == nil { unlink(staged) } }
            // In place, a slotted SRC's slot file is locked (as every slot change and rekey --data-key lock it) from
            // before the copy until SRC is replaced: no data key rotation starts or ends in between.
            let whileSlotsAreLocked: (() throws -> Void) throws -> Void = { body in
                if slotted, destination == nil {
                    try KeySlots.withSlotFileLock(forDatabaseAt: source, body)
                } else {
                    try body()
                }
            }
            try whileSlotsAreLocked {
                let slotsBefore = slotted ? FileManager.default.contents(atPath: slotPath) : nil
                try DatabaseCopy(
                    source: source, sourceProvider: provider, sourceSettings: key.settings,
                    destination: staged, destinationProvider: provider,
                    settings: CipherSettings(format: .v4),
                    force: force, quiet: quiet, verb: "migrate",
                    // In place SRC's slot file stays (same identity); it only has to open the copy.
                    slots: slotted ? .source : nil, placesSlotFile: destination != nil
                ).run()
                if destination == nil {
                    // A slot change meanwhile (a data key rotation, say) would not match the copy: not replaced.
                    if slotted, FileManager.default.contents(atPath: slotPath) != slotsBefore {
                        throw CLIError(
                            "the key slots of \(source) changed during the migration: not replaced; try again",
                            code: Exit.busy)
                    }
                    // The copy's own connection to SRC is closed and this one holds the write lock: a side file
                    // with content belongs to another process, whose writes the upgraded copy would not hold. A
                    // process that has SRC open would go on writing to the replaced file: refused too.
                    try refuseIfOpenElsewhere()
                    // No other process has SRC open (checked just above), and this connection read SRC and holds
                    // its write lock: a hot journal would have been rolled back by that read. A -journal still there
                    // is one SQLite does not count as hot (a process stopped while writing its header): nothing in
                    // it belongs to the database, and it would sit beside the new file. It goes.
                    if fileSize(source + "-journal") > 0 { unlink(source + "-journal") }
                    if fileSize(source + "-wal") > 0 {
                        throw CLIError(
                            "\(source) has a -wal that a stopped process left (no process has it open): not replaced; "
                                + "open it once (fmdb-cipher check \(source)) to checkpoint it, then run migrate again",
                            code: Exit.busy)
                    }
                    // SRC's own shared-memory file (it is this process's alone now) goes with it.
                    unlink(source + "-shm")
                    // The migrated copy (0600, or SRC's stricter mode) replaces SRC: in place was asked for.
                    guard rename(staged, source) == 0 else {
                        throw CLIError(
                            "cannot replace \(source) with its migrated copy: \(String(cString: strerror(errno)))",
                            code: Exit.ioError)
                    }
                    committed = true
                    // The replacement is done; a power loss before the directory reaches the disk could undo it.
                    if !Self.syncDirectory(of: source) {
                        Output.message(
                            "fmdb-cipher: warning: \(source) was replaced by its migrated copy, but its directory could "
                                + "not be synced (\(String(cString: strerror(errno)))): a power loss now may bring the old file back"
                        )
                    }
                }
            }
            committed = true
            // The lock is released on the replaced file's inode; the connection closes with it.
            if holder.isInTransaction { holder.rollback() }
            if !quiet {
                let from = current?.description ?? "SQLCipher"
                Output.message("migrated \(source) (\(from)) → \(target) (SQLCipher 4)")
            }
            OpeningFlags.note(target, kdf: kdf, settings: CipherSettings(format: .v4))
        }
    }
}
