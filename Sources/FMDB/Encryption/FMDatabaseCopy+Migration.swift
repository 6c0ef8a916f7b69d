import CSQLCipher
import Foundation

/// Migration to SQLCipher 4's format: into a new file, or in place.
extension FMDatabaseCopy {
    /// Copies the SQLCipher 1-3 database at `source` into a new SQLCipher 4 file at `destination`, under the
    /// same key (a passphrase gets SQLCipher 4's KDF), verified and atomic as every copy. A slotted SRC, opened
    /// through a ``KeySlotKeyProvider``, keeps its data key and salt, and its slot file goes to `DEST-keyslots`.
    ///
    /// ```swift
    /// try FMDatabaseCopy.migrate("old.db", keyProvider: PassphraseKeyProvider("secret"), to: "new.db")
    /// ```
    /// - Throws: ``FMDatabaseError``: `SQLITE_MISUSE` when the linked SQLCipher cannot write SQLCipher 4 files, or
    ///   when SRC has key slots and `keyProvider` does not open it through one; otherwise as ``run()``.
    @discardableResult
    public static func migrate(
        _ source: String, keyProvider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        to destination: String, replacingExisting: Bool = false, onStage: ((Stage) -> Void)? = nil
    ) throws -> Report {
        let slotted = try requireMigratable(source, keyProvider: keyProvider)
        var copy = FMDatabaseCopy(
            from: source, keyProvider: keyProvider, settings: settings, to: destination,
            destinationKeyProvider: keyProvider, destinationSettings: CipherSettings(format: .v4))
        copy.slotFile = slotted ? .source : .none
        copy.replacesExisting = replacingExisting
        copy.onStage = onStage
        return try copy.run()
    }

    /// Replaces the SQLCipher 1-3 database at `path` with a verified SQLCipher 4 copy of itself, under the same
    /// key (a passphrase gets SQLCipher 4's KDF).
    ///
    /// ```swift
    /// if let report = try FMDatabaseCopy.migrateInPlace("app.db", keyProvider: PassphraseKeyProvider("secret")) {
    ///     print("was", report.sourceFormat?.description ?? "?")
    /// }
    /// ```
    ///
    /// How, so that no write is lost and SRC is intact on any failure:
    /// - Refused while another process has SRC open (found in `/proc`; when other users' processes cannot be
    ///   read and SRC is writable by others, "could not check" refuses too): after the rename it would go on
    ///   writing to the replaced file.
    /// - One connection holds SRC's write lock (`BEGIN IMMEDIATE`) from before the copy until after the rename.
    ///   A WAL SRC is first switched to a rollback journal (the copy has one too; put back on a failure): the
    ///   holding connection, closing on the replaced inode, must not checkpoint a `-wal` that by then belongs to
    ///   the new file. The journal mode is not copied: set `PRAGMA journal_mode = WAL` again if you use it.
    /// - The copy is written and verified in a private directory, published as `.NAME.fmdb-cipher-migrate-PID-X`
    ///   beside SRC (0600, or SRC's stricter mode), then renamed over SRC, and the directory is synced.
    ///   A process killed before that rename leaves SRC as it was (openable with its key; in rollback-journal
    ///   mode if it was switched) and at most that staged file or the private directory its copy was being
    ///   written in: the next migration in place of SRC removes them once their process is gone.
    /// - A slotted SRC (opened through a ``KeySlotKeyProvider``) keeps its data key and salt: its slot file,
    ///   locked as every slot change locks it from before the copy until SRC is replaced, opens the copy
    ///   (verified before the rename) and stays as it is.
    ///
    /// - Returns: what the copy did, or nil when SRC is already in SQLCipher 4's format (nothing is done).
    /// - Throws: ``FMDatabaseError``: ``Failure/sourceInUse`` (`SQLITE_BUSY`) when SRC is open elsewhere, cannot
    ///   leave WAL mode, has a `-wal` a stopped process left, or its slots changed meanwhile; `SQLITE_MISUSE` as
    ///   ``migrate(_:keyProvider:settings:to:replacingExisting:onStage:)``; otherwise as ``run()``. SRC is as it
    ///   was.
    @discardableResult
    public static func migrateInPlace(
        _ path: String, keyProvider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        onStage: ((Stage) -> Void)? = nil
    ) throws -> Report? {
        let slotted = try requireMigratable(path, keyProvider: keyProvider)
        // A process that has SRC open is said at once (no lock waited for).
        try refuseIfOpenElsewhere(path)
        onStage?(.openingSource)
        // This connection holds SRC's write lock from before the copy until after the rename, so no other
        // connection commits a write the copy would not hold.
        let holder = try open(
            path, keyProvider: keyProvider, settings: settings, readOnly: false, creatingAttached: false)
        defer { holder.close() }
        let current = holder.cipherFormat
        if current == .v4 { return nil }
        try refuseIfOpenElsewhere(path)
        var switchedFromWAL = false
        if try holder.executeQuery("PRAGMA journal_mode", values: nil).firstText()?.lowercased() == "wal" {
            guard
                try holder.executeQuery("PRAGMA journal_mode = DELETE", values: nil).firstText()?.lowercased()
                    == "delete"
            else {
                throw failure(
                    .sourceInUse, SQLITE_BUSY,
                    "\(path) is in WAL mode and could not leave it (another connection is reading?): not replaced; "
                        + "try again")
            }
            switchedFromWAL = true
        }
        try holder.executeUpdate("BEGIN IMMEDIATE", values: nil)
        var committed = false
        defer {
            if holder.isInTransaction { _ = holder.rollback() }
            if switchedFromWAL, !committed {
                _ = try? holder.executeQuery("PRAGMA journal_mode = WAL", values: nil).firstText()
            }
        }
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        let stagedPrefix = ".\(url.lastPathComponent).fmdb-cipher-migrate-"
        removeInterruptedMigrations(prefix: stagedPrefix, in: folder, report: onStage ?? { _ in })
        // The copy goes to a staged file first (a copy never writes over its SRC); the process id in its name
        // tells a later migration whether the run that made it is gone.
        let staged = folder + "/" + stagedPrefix + "\(getpid())-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
        defer { if !committed { unlink(staged) } }
        let replace = { () throws -> Report in
            let slotsBefore =
                slotted ? FileManager.default.contents(atPath: KeySlots.slotFilePath(forDatabaseAt: path)) : nil
            var copy = FMDatabaseCopy(
                from: path, keyProvider: keyProvider, settings: settings, to: staged,
                destinationKeyProvider: keyProvider, destinationSettings: CipherSettings(format: .v4))
            copy.onStage = onStage
            // SRC's slot file stays (same identity): it only has to open the copy.
            copy.slotFile = slotted ? .source : .none
            copy.publishesSlotFile = false
            var report = try copy.run()
            report.sourceFormat = current
            // A slot change meanwhile (a data key rotation, say) would not match the copy: not replaced.
            if slotted, FileManager.default.contents(atPath: KeySlots.slotFilePath(forDatabaseAt: path)) != slotsBefore
            {
                throw failure(
                    .sourceInUse, SQLITE_BUSY,
                    "the key slots of \(path) changed during the migration: not replaced; try again")
            }
            // The copy's own connection to SRC is closed and this one holds the write lock: a side file with content
            // belongs to another process, whose writes the copy would not hold. A process that has SRC open would go
            // on writing to the replaced file: refused too.
            try refuseIfOpenElsewhere(path)
            // No other process has SRC open (checked just above), and this connection read SRC and holds its write
            // lock: a hot journal would have been rolled back by that read. A -journal still there is one SQLite
            // does not count as hot (a process stopped while writing its header): nothing in it belongs to the
            // database, and it would sit beside the new file. It goes.
            if fileSize(path + "-journal") > 0 { unlink(path + "-journal") }
            if fileSize(path + "-wal") > 0 {
                throw failure(
                    .sourceInUse, SQLITE_BUSY,
                    "\(path) has a -wal that a stopped process left (no process has it open): not replaced; open it "
                        + "once with its key to checkpoint it, then migrate again")
            }
            // SRC's own shared-memory file (it is this process's alone now) goes with it.
            unlink(path + "-shm")
            var copyIdentity = stat()
            let identified = lstat(staged, &copyIdentity) == 0
            // An error from rename(2) does not prove the rename did not happen: SRC's path is asked.
            if rename(staged, path) != 0, !(identified && Self.holdsFile(path, copyIdentity)) {
                let number = errno
                throw FMDatabaseError(
                    code: FileSystem.resultCode(forSystemError: number) ?? SQLITE_IOERR,
                    message: "cannot replace \(path) with its migrated copy: \(FileSystem.describe(number))")
            }
            committed = true
            // The replacement is done; a power loss before the directory reaches the disk could undo it.
            let syncFailure = FileSystem.syncDirectory(folder)
            if syncFailure != 0 {
                report.replacementNotSynced = FMDatabaseError(
                    code: FileSystem.resultCode(forSystemError: syncFailure) ?? SQLITE_IOERR,
                    message: "\(path) was replaced by its migrated copy, but its directory could not be synced "
                        + "(\(FileSystem.describe(syncFailure))): a power loss now may bring the old file back")
            }
            return report
        }
        // A slotted SRC's slot file is locked (as every slot change and data key rotation lock it) from before the
        // copy until SRC is replaced: no data key rotation starts or ends in between.
        let report =
            slotted
            ? try KeySlotStorage.withExclusiveLock(forSlotFile: KeySlots.slotFilePath(forDatabaseAt: path), replace)
            : try replace()
        // The lock is released on the replaced file's inode; the connection closes with it.
        return report
    }

    /// Whether `path` (not followed if a link) is the file `identity` describes (same device and inode).
    private static func holdsFile(_ path: String, _ identity: stat) -> Bool {
        var now = stat()
        return lstat(path, &now) == 0 && now.st_dev == identity.st_dev && now.st_ino == identity.st_ino
    }

    /// Checks that SQLCipher 4 files can be written here and that a slotted `path` is opened through a slot.
    /// - Returns: whether `path` has a slot file.
    private static func requireMigratable(_ path: String, keyProvider: any KeyProvider) throws -> Bool {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            throw FMDatabaseError.misuse(
                "A migration writes SQLCipher 4 files, which the linked SQLCipher \(SQLCipherRuntime.version ?? "?") "
                    + "cannot write: install SQLCipher 4.")
        }
        try requireSource(path)
        var status = stat()
        let slotted = lstat(KeySlots.slotFilePath(forDatabaseAt: path), &status) == 0
        if slotted, !(keyProvider.unwrappedKeyProvider is KeySlotKeyProvider) {
            throw FMDatabaseError.misuse(
                "\(path) has key slots: open it through one (a KeySlotKeyProvider) so they are carried; under another "
                    + "key the upgraded file would get a new salt and no slot would open it.")
        }
        return slotted
    }

    /// Refuses (``Failure/sourceInUse``) when another process has `path` open: after the rename it would go on
    /// writing to the replaced file, and every write it acknowledged from then on would be lost. Other users'
    /// processes, whose descriptors cannot be read without privilege, matter only when `path` is writable by
    /// others: then "could not check" refuses too.
    static func refuseIfOpenElsewhere(_ path: String) throws {
        var status = stat()
        guard let open = OpenElsewhere.check(path), stat(path, &status) == 0,
            open.unreadable == 0 || (status.st_mode & 0o022) == 0
        else {
            throw failure(
                .sourceInUse, SQLITE_BUSY,
                "cannot check whether another process has \(path) open: not replaced; migrate into a new file instead")
        }
        if !open.holders.isEmpty {
            let pids = open.holders.prefix(5).map(String.init).joined(separator: ", ")
            throw failure(
                .sourceInUse, SQLITE_BUSY,
                "\(path) is open in another process (pid \(pids)): not replaced; stop it and try again, or migrate "
                    + "into a new file")
        }
    }

    /// Removes what killed migrations of the same file left: their staged copies
    /// (`.NAME.fmdb-cipher-migrate-PID-X`) and the private directories their copies were written in
    /// (`..NAME.fmdb-cipher-migrate-PID-X.fmdb-cipher-PID-XXXXXX`, as every copy's, by
    /// `PrivateOutput.removeInterruptedCopies`). Only this user's, and only when their process is gone.
    private static func removeInterruptedMigrations(
        prefix: String, in folder: String, report: (Stage) -> Void
    ) {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        var stagedNames: Set<String> = []
        for entry in entries {
            if entry.hasPrefix("." + prefix), let end = entry.range(of: ".fmdb-cipher-", options: .backwards) {
                stagedNames.insert(String(entry[entry.index(after: entry.startIndex)..<end.lowerBound]))
            }
            guard entry.hasPrefix(prefix) else { continue }
            let rest = entry.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]), pid > 0,
                kill(pid, 0) == -1, errno == ESRCH
            else { continue }
            var status = stat()
            let staged = folder + "/" + entry
            guard lstat(staged, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_uid == getuid() else {
                continue
            }
            unlink(staged)
        }
        for name in stagedNames {
            PrivateOutput.removeInterruptedCopies(of: name, in: folder, report: report)
        }
    }
}

extension FMResultSet {
    /// The first column of the first row as text (nil when there is no row), reading with `nextWithError()`.
    fileprivate func firstText() throws -> String? {
        defer { close() }
        return try nextWithError() ? string(forColumnIndex: 0) : nil
    }
}
