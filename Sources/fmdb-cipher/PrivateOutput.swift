import CToolSupport
import FMDB
import Foundation

/// The one way the tool creates a file (encrypt, decrypt and export's DEST, rekey's --backup):
///
/// 1. DEST is checked with lstat(2): anything there — a file, a FIFO, a symlink, even a dangling one —
///    "exists" and is refused unless --force; a directory is always refused.
/// 2. A private directory is made beside DEST with mkdtemp(3) (mode 0700, whatever the umask), and the
///    new database is created in it with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600. SQLite puts the
///    database's `-journal` (and `-wal`/`-shm`) beside it, so inside the private directory too, with the
///    database file's mode. Nobody else can plant a link there, and no umask makes anything readable.
/// 3. When the copy is written and verified, the file gets its final mode (0600, or the source file's
///    mode where that is stricter) and is renamed into place with renameat2(RENAME_NOREPLACE), so a DEST
///    that appeared meanwhile is not replaced (exit 73) — unless --force, where rename(2) replaces it (a
///    symlink at DEST is replaced, never followed). Where the file system has no RENAME_NOREPLACE,
///    link(2) + unlink(2) does the same; where it has neither, DEST is refused unless --force.
/// 4. The private directory is removed, on success and on failure, and on SIGINT, SIGTERM or SIGHUP
///    until the commit starts (the signal handler removes it, then the tool exits 128 + the signal;
///    `ProcessHardening.installCleanupHandlers`). A SIGKILL, or a signal during the commit, can leave it
///    behind (`.DEST.fmdb-cipher-PID-XXXXXX`, 0700): never a partial DEST. The next run that writes DEST
///    removes such a directory once its run no longer holds the directory's lock, unless it holds an old pair
///    (`removeInterruptedCopies`).
///
/// DEST and `DEST-keyslots` are a pair: a slot file opens only the database whose salt it holds. `DEST-keyslots`
/// is checked as DEST is (exit 73 unless --force) before any work, whether or not the copy has slots. A copy
/// of a slotted database carries its slot file (`carriesSlotFile`): it is written beside the new file in the
/// private directory (`slotFile`, by the library: 0600, no link followed). When a slot file is involved (the
/// copy has one, or --force replaces a DEST that has one), `commit` holds the lock of `DEST-keyslots` (the one
/// every slot change takes) and moves, syncing the directories after each step:
///
/// 1. with --force, the old pair into the private directory: a hard link `old.db-keyslots` to the old
///    `DEST-keyslots` (which stays in place), then the old DEST renamed to `old.db` (a pair there, openable as
///    it is); where the file system has no hard links, the old slot file is moved there after the old DEST;
/// 2. the new slot file renamed over `DEST-keyslots` (a copy with slots), or the old one unlinked (without);
/// 3. the new database renamed to DEST;
/// 4. the private directory goes, with the old pair.
///
/// So DEST never sits beside a slot file that is not its own, and at every instant the old pair and the new
/// pair are each complete on disk (at DEST or in the private directory). If a step fails, the steps done are
/// undone in reverse (a slot file placed is removed only if it is still ours; the old pair is moved back
/// without replacing anything that appeared meanwhile) and the error says so; if the old pair cannot be put
/// back, the private directory is kept and the error names it. A crash between steps 1 and 3 leaves no DEST,
/// the old pair as `.DEST.fmdb-cipher-XXXXXX/old.db` + `old.db-keyslots`, the verified copy as `new.db` there,
/// and `DEST-keyslots` the old or the new slot file or none: move `old.db` and `old.db-keyslots` back, or move
/// `new.db` to DEST when `DEST-keyslots` is the new one, or run again with --force. A copy without slots that
/// replaces a slotted DEST removes `DEST-keyslots` (said on standard error): it would not open the new DEST.
final class PrivateOutput {
    /// DEST, as the user named it.
    let destination: String
    /// The private directory beside DEST.
    let directory: String
    /// The new database, inside `directory`.
    let file: String
    /// Its key slot file (`new.db-keyslots`), when the copy has one.
    let slotFile: String
    /// Where --force moves the old DEST (and `old.db-keyslots` its slot file) while the new pair goes in place.
    private let oldFile: String
    private let carriesSlotFile: Bool
    private let finalMode: mode_t
    private let force: Bool
    private var done = false
    /// Set when the old pair could not be put back: the private directory (which holds it) stays.
    private var keepsDirectory = false
    /// The signal handler's slot for `directory` (-1: not registered).
    private var cleanupSlot: Int32 = -1
    /// A descriptor of `directory` holding an exclusive flock while this run lives (-1: none).
    private var directoryLock: Int32 = -1

    /// Checks DEST (exit 73 when it exists without --force, or cannot be created; 64 when it is SRC) and
    /// makes the private directory and the empty, private new file.
    init(destination: String, force: Bool, source: String?, carriesSlotFile: Bool = false) throws {
        let dest = URL(fileURLWithPath: destination).standardizedFileURL
        if let source {
            if dest.path == URL(fileURLWithPath: source).standardizedFileURL.path {
                throw CLIError.usage("DEST must differ from SRC")
            }
        }
        var status = stat()
        if lstat(dest.path, &status) == 0 {
            if (status.st_mode & S_IFMT) == S_IFDIR {
                throw CLIError("\(destination): is a directory", code: Exit.cannotCreate)
            }
            if let source, Self.sameFile(status, source) {
                throw CLIError.usage("DEST must differ from SRC (they are the same file)")
            }
            if !force {
                let what = (status.st_mode & S_IFMT) == S_IFLNK ? "a symbolic link" : "something"
                throw CLIError(
                    "\(destination): already exists (\(what) is there; use --force to replace it)",
                    code: Exit.cannotCreate)
            }
        }
        try Self.refuseJournalFiles(of: destination)
        // DEST-keyslots too, for every copy: a slot file left beside a new DEST would not be its own.
        if lstat(KeySlots.slotFilePath(forDatabaseAt: dest.path), &status) == 0 {
            let slots = KeySlots.slotFilePath(forDatabaseAt: destination)
            if (status.st_mode & S_IFMT) == S_IFDIR {
                throw CLIError("\(slots): is a directory", code: Exit.cannotCreate)
            }
            if !force {
                let action = carriesSlotFile ? "replace it" : "remove it: the new DEST has no key slots"
                throw CLIError(
                    "\(slots): already exists (the key slot file of DEST; use --force to \(action))",
                    code: Exit.cannotCreate)
            }
        }
        let folder = dest.deletingLastPathComponent().path
        var folderStatus = stat()
        guard stat(folder, &folderStatus) == 0, (folderStatus.st_mode & S_IFMT) == S_IFDIR else {
            throw CLIError("\(folder): no such directory", code: Exit.cannotCreate)
        }
        Self.removeInterruptedCopies(of: dest.lastPathComponent, in: folder)
        // The run's process id is in the name, so a later run can tell a directory whose run was killed.
        var template = Array("\(folder)/.\(dest.lastPathComponent).fmdb-cipher-\(getpid())-XXXXXX".utf8CString)
        // Made and registered for the signal handler with the signals blocked in between.
        let slot = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.map { fmdb_tool_make_private_directory($0) } ?? -1
        }
        guard slot != -1 else {
            throw CLIError(
                "cannot create a private directory in \(folder): \(String(cString: strerror(errno)))",
                code: Exit.cannotCreate)
        }
        directory = template.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { String(cString: $0) } ?? ""
        }
        // From here until the commit moves anything of the old DEST in, a signal removes the directory.
        cleanupSlot = slot
        // Held for the run's life: a later run removes the directory only when nobody holds this lock.
        directoryLock = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if directoryLock >= 0 { flock(directoryLock, LOCK_EX) }
        file = directory + "/new.db"
        slotFile = KeySlots.slotFilePath(forDatabaseAt: file)
        oldFile = directory + "/old.db"
        self.carriesSlotFile = carriesSlotFile
        self.destination = destination
        self.force = force
        var mode: mode_t = 0o600
        if let source, stat(source, &status) == 0 { mode &= status.st_mode }
        finalMode = mode
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            rmdir(directory)
            fmdb_tool_cleanup_unregister(cleanupSlot)
            throw CLIError("cannot create the new database beside \(destination): \(reason)", code: Exit.cannotCreate)
        }
        // The umask may have removed bits SQLite needs (e.g. umask 0277); the file is ours alone anyway.
        fchmod(fd, 0o600)
        close(fd)
    }

    deinit {
        if !done { discard() }
        if directoryLock >= 0 { close(directoryLock) }
    }

    private static func sameFile(_ status: stat, _ other: String) -> Bool {
        var otherStatus = stat()
        return stat(other, &otherStatus) == 0
            && otherStatus.st_dev == status.st_dev && otherStatus.st_ino == status.st_ino
    }

    /// Gives the new file its final mode and moves it (and its slot file) to DEST without replacing anything
    /// unless --force; see the type's comment for the order when a slot file is involved.
    func commit() throws {
        do {
            try Self.refuseJournalFiles(of: destination)
        } catch {
            discard()
            throw error
        }
        guard chmod(file, finalMode) == 0 else {
            let reason = String(cString: strerror(errno))
            discard()
            throw CLIError("cannot set the mode of the new database: \(reason)", code: Exit.ioError)
        }
        let slotDestination = KeySlots.slotFilePath(forDatabaseAt: destination)
        guard carriesSlotFile || (force && Self.exists(slotDestination)) else {
            // No slot file on either side: one rename, DEST is the old file or the new one at every instant.
            defer { discard() }
            var placed = stat()
            let identified = lstat(file, &placed) == 0
            try move(file, to: destination, what: "database")
            // Reported done only once the rename is on disk: a power loss must not lose a copy said to be made.
            do {
                try syncDirectories()
            } catch {
                var now = stat()
                if identified, lstat(destination, &now) == 0, now.st_dev == placed.st_dev, now.st_ino == placed.st_ino {
                    unlink(destination)
                }
                throw error
            }
            done = true
            return
        }
        // No slot change of the old DEST (or of a DEST made meanwhile) may land between the moves.
        let removedOldSlotFile = try KeySlots.withSlotFileLock(forDatabaseAt: destination) {
            try commitPair(slotDestination: slotDestination)
        }
        if removedOldSlotFile, !carriesSlotFile {
            Output.message(
                "fmdb-cipher: note: removed \(slotDestination), the key slot file of the DEST that was replaced: "
                    + "it does not open the new \(destination), which has no key slots")
        }
    }

    /// One step of a commit, to be undone if a later one fails.
    private enum Step {
        /// The old DEST was moved to `aside`.
        case movedAside(original: String, aside: String)
        /// The old slot file at `original` was replaced or removed; `aside` is a hard link to it (or it was moved there).
        case removedSlotFile(original: String, aside: String)
        /// The new slot file was moved to `path` (identified by device and inode).
        case placed(path: String, device: UInt64, inode: UInt64)
    }

    /// Steps 1-4 of the type's comment. Returns whether an old `DEST-keyslots` was replaced or removed.
    private func commitPair(slotDestination: String) throws -> Bool {
        // The old pair may move into the private directory: a signal must no longer remove it.
        fmdb_tool_cleanup_unregister(cleanupSlot)
        cleanupSlot = -1
        var steps: [Step] = []
        let oldSlotFile = KeySlots.slotFilePath(forDatabaseAt: oldFile)
        var removedOldSlotFile = false
        do {
            // 1. The old pair into the private directory: first a hard link to the old slot file (it stays at
            //    DEST-keyslots), then the old DEST; the old pair is then whole as old.db + old.db-keyslots.
            var linkedOldSlotFile = false
            let hasOldSlotFile = force && Self.exists(slotDestination)
            if hasOldSlotFile {
                linkedOldSlotFile = link(slotDestination, oldSlotFile) == 0
                if linkedOldSlotFile { try syncDirectories() }
            }
            if force, Self.exists(destination) {
                try moveAside(destination, to: oldFile, what: "the database being replaced")
                steps.append(.movedAside(original: destination, aside: oldFile))
                try syncDirectories()
            }
            if hasOldSlotFile, !linkedOldSlotFile {
                // No hard links on this file system: the old slot file is moved after the old DEST.
                try moveAside(slotDestination, to: oldSlotFile, what: "the key slot file being replaced")
                steps.append(.removedSlotFile(original: slotDestination, aside: oldSlotFile))
                try syncDirectories()
            }
            // 2. The new slot file over the old one (kept in the private directory), or the old one removed.
            if carriesSlotFile {
                try move(slotFile, to: slotDestination, what: "key slot file")
                if linkedOldSlotFile { steps.append(.removedSlotFile(original: slotDestination, aside: oldSlotFile)) }
                var placed = stat()
                if lstat(slotDestination, &placed) == 0 {
                    steps.append(
                        .placed(path: slotDestination, device: UInt64(placed.st_dev), inode: UInt64(placed.st_ino)))
                }
                // The slot file reaches the disk before the database that needs it.
                try syncDirectories()
            } else if linkedOldSlotFile {
                guard unlink(slotDestination) == 0 else {
                    let reason = String(cString: strerror(errno))
                    throw CLIError(
                        "cannot remove \(slotDestination), the key slot file of the DEST being replaced: \(reason)",
                        code: Exit.ioError)
                }
                steps.append(.removedSlotFile(original: slotDestination, aside: oldSlotFile))
                try syncDirectories()
            }
            removedOldSlotFile = hasOldSlotFile
            // 3. The new database.
            var newFile = stat()
            let identified = lstat(file, &newFile) == 0
            try move(file, to: destination, what: "database")
            if identified {
                steps.append(.placed(path: destination, device: UInt64(newFile.st_dev), inode: UInt64(newFile.st_ino)))
            }
            try syncDirectories()
        } catch {
            let error = CLIError.from(error, context: destination)
            let notRestored = undo(steps)
            if notRestored.isEmpty {
                discard()
                done = true
                let note = force ? "; \(destination) and its key slot file are as they were" : ""
                throw CLIError(error.message + note, code: error.code)
            }
            keepsDirectory = true
            discard()
            done = true
            throw CLIError(
                error.message + "; could not put back " + notRestored.joined(separator: ", ")
                    + ": move them back by hand", code: error.code)
        }
        // 4. The old pair goes with the private directory.
        done = true
        discard()
        return removedOldSlotFile
    }

    /// Undoes `steps` in reverse; returns what could not be put back ("ASIDE (was ORIGINAL)").
    private func undo(_ steps: [Step]) -> [String] {
        var notRestored: [String] = []
        for step in steps.reversed() {
            switch step {
            case .placed(let path, let device, let inode):
                // Only if it is still the file this run placed.
                var now = stat()
                if lstat(path, &now) == 0, UInt64(now.st_dev) == device, UInt64(now.st_ino) == inode { unlink(path) }
            case .movedAside(let original, let aside), .removedSlotFile(let original, let aside):
                // Back without replacing anything that appeared at the original path meanwhile.
                if !Self.renameWithoutReplacing(aside, to: original) {
                    notRestored.append("\(aside) (was \(original))")
                }
            }
        }
        if !steps.isEmpty { syncDirectoriesQuietly() }
        return notRestored
    }

    /// Moves the old DEST or its slot file into the private directory (nothing is there: `old.db` is this run's name).
    private func moveAside(_ path: String, to aside: String, what: String) throws {
        guard Self.renameWithoutReplacing(path, to: aside) else {
            let reason = String(cString: strerror(errno))
            throw CLIError("cannot move \(what) (\(path)) aside: \(reason)", code: Exit.ioError)
        }
    }

    /// renameat2(RENAME_NOREPLACE), or link(2) + unlink(2) where the file system has no RENAME_NOREPLACE.
    private static func renameWithoutReplacing(_ from: String, to target: String) -> Bool {
        if fmdb_tool_rename_noreplace(from, target) == 0 { return true }
        guard errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP else { return false }
        guard link(from, target) == 0 else { return false }
        unlink(from)
        return true
    }

    /// A `DEST-wal` or `DEST-journal` that SQLite would replay belongs to the DEST that is there (open in
    /// another program, or not closed cleanly), or to none: SQLite would apply it to whatever file is at DEST
    /// next, so a new DEST beside one would be corrupted at its first open. Refused, even with --force (exit
    /// 75 when DEST is there, 73 when it is not), before anything is written and again right before the
    /// commit. Only a file that starts with its format's magic number counts (the WAL's 0x377f0682/3, the
    /// journal's 0xd9d505f9; their headers are not encrypted): an empty or zeroed one, as journal_mode
    /// TRUNCATE and PERSIST leave, is not replayed.
    static func refuseJournalFiles(of destination: String) throws {
        let magic: [String: [[UInt8]]] = [
            "-wal": [[0x37, 0x7F, 0x06, 0x82], [0x37, 0x7F, 0x06, 0x83]], "-journal": [[0xD9, 0xD5, 0x05, 0xF9]],
        ]
        for suffix in ["-wal", "-journal"] {
            // O_NONBLOCK: opening a FIFO planted there returns at once (and is refused below) instead of
            // waiting for a writer forever; a regular file reads as usual.
            let fd = open(destination + suffix, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var status = stat()
            let isRegular = fstat(fd, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
            var head = [UInt8](repeating: 0, count: 4)
            let count = isRegular ? head.withUnsafeMutableBytes { read(fd, $0.baseAddress, 4) } : 0
            close(fd)
            guard isRegular else {
                throw CLIError(
                    "\(destination)\(suffix): is not a regular file (\(InputFiles.specialFileKind(destination + suffix) ?? "not a file")): "
                        + "SQLite would open it beside the new database; remove it, then run again",
                    code: Exit.cannotCreate)
            }
            guard count == 4, magic[suffix]?.contains(head) == true else { continue }
            if exists(destination) {
                throw CLIError(
                    "\(destination)\(suffix): exists: DEST is open in another program or was not closed cleanly, "
                        + "and SQLite would apply that file to the new database; close the program, or open DEST once "
                        + "with its key so SQLite finishes it, then run again", code: Exit.busy)
            }
            throw CLIError(
                "\(destination)\(suffix): exists without \(destination): SQLite would apply it to the new "
                    + "database; remove it if it is not needed, then run again", code: Exit.cannotCreate)
        }
    }

    private static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// fsync of DEST's directory and of the private directory: each rename between them reaches the disk in
    /// order. A failure throws (exit 74): a step whose rename may not survive a power loss is not reported done.
    private func syncDirectories() throws {
        for folder in [URL(fileURLWithPath: destination).deletingLastPathComponent().path, directory] {
            let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else {
                throw CLIError(
                    "cannot open \(folder) to sync it: \(String(cString: strerror(errno)))", code: Exit.ioError)
            }
            defer { close(fd) }
            guard fsync(fd) == 0 else {
                throw CLIError(
                    "cannot sync the directory \(folder): \(String(cString: strerror(errno))); the new database "
                        + "is not in place", code: Exit.ioError)
            }
        }
    }

    /// `syncDirectories` while undoing: best effort, the undo's own outcome is what is reported.
    private func syncDirectoriesQuietly() {
        _ = try? syncDirectories()
    }

    /// Moves `from` to `to`: replacing what is there with --force, never otherwise.
    private func move(_ from: String, to target: String, what: String) throws {
        if force {
            guard rename(from, target) == 0 else {
                let reason = String(cString: strerror(errno))
                throw CLIError("cannot move the new \(what) into place at \(target): \(reason)", code: Exit.ioError)
            }
        } else {
            try moveWithoutReplacing(from, to: target, what: what)
        }
    }

    private func moveWithoutReplacing(_ from: String, to target: String, what: String) throws {
        if fmdb_tool_rename_noreplace(from, target) == 0 { return }
        var failure = errno
        if failure == EINVAL || failure == ENOSYS || failure == EOPNOTSUPP {
            // No RENAME_NOREPLACE here: link(2) fails with EEXIST too, and never follows a link at DEST.
            if link(from, target) == 0 {
                unlink(from)
                return
            }
            failure = errno
            if failure == EPERM || failure == EOPNOTSUPP {
                throw CLIError(
                    "\(target): this file system can neither rename without replacing nor link, so the "
                        + "tool cannot be sure not to replace a file created meanwhile; use --force",
                    code: Exit.cannotCreate)
            }
        }
        if failure == EEXIST {
            throw CLIError(
                "\(target): appeared while the new \(what) was being written, and was not replaced "
                    + "(use --force to replace it)", code: Exit.cannotCreate)
        }
        let reason = String(cString: strerror(failure))
        throw CLIError("cannot move the new \(what) into place at \(target): \(reason)", code: Exit.ioError)
    }

    /// Removes the new file (if still there), SQLite's side files, the slot file, the old pair --force moved
    /// aside (unless it could not be put back) and the private directory.
    /// Removes what a killed run (SIGKILL, a crash, a power loss) left in its private directory beside DEST:
    /// a partial or unpublished copy (`new.db` and its side files: a decrypt's is plaintext). Only directories
    /// of this user whose run's process is gone, and never one that holds an old pair (`old.db`, which a
    /// crash during a --force commit leaves for the user to move back, see the type's comment).
    static func removeInterruptedCopies(of name: String, in folder: String) {
        let prefix = ".\(name).fmdb-cipher-"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        let folderFD = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folderFD >= 0 else { return }
        defer { close(folderFD) }
        for entry in entries where entry.hasPrefix(prefix) {
            let rest = entry.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]), pid > 0,
                kill(pid, 0) == -1, errno == ESRCH
            else { continue }
            // Opened without following a link, then checked through the descriptor: what is removed is the
            // directory that was checked, even if the name is swapped meanwhile.
            let directoryFD = openat(folderFD, entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard directoryFD >= 0 else { continue }
            defer { close(directoryFD) }
            var status = stat()
            var oldPair = stat()
            // This user's private directory (0700) whose run holds no lock on it any more (a live run, in another
            // PID namespace or on another host, still does: its process id alone cannot tell), holding no old
            // pair that a crash left to move back.
            guard fstat(directoryFD, &status) == 0, status.st_uid == getuid(), (status.st_mode & 0o077) == 0,
                flock(directoryFD, LOCK_EX | LOCK_NB) == 0,
                fstatat(directoryFD, "old.db", &oldPair, AT_SYMLINK_NOFOLLOW) != 0
            else { continue }
            for file in ["new.db", "new.db-journal", "new.db-wal", "new.db-shm", "new.db-keyslots"] {
                unlinkat(directoryFD, file, 0)
            }
            if unlinkat(folderFD, entry, AT_REMOVEDIR) == 0 {
                Output.message(
                    "fmdb-cipher: note: removed \(folder)/\(entry), the unfinished copy of a run that was killed")
            }
        }
    }

    func discard() {
        defer {
            // After the removal: a signal meanwhile removes what is left.
            fmdb_tool_cleanup_unregister(cleanupSlot)
            cleanupSlot = -1
        }
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(file + suffix) }
        unlink(slotFile)
        guard !keepsDirectory else { return }
        unlink(oldFile)
        unlink(KeySlots.slotFilePath(forDatabaseAt: oldFile))
        rmdir(directory)
    }

    /// Creates an empty file at `path` for a new database (`sql` on a missing file): mode 0600 whatever the
    /// umask, O_EXCL|O_NOFOLLOW so a file or link that is already there (a dangling symlink included) is
    /// refused with exit 73, never followed or replaced. SQLite gives the journal the same mode.
    static func createEmptyDatabase(at path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason =
                errno == EEXIST
                ? "something is already there (a symbolic link?)"
                : String(cString: strerror(errno))
            throw CLIError("cannot create the database \(path): \(reason)", code: Exit.cannotCreate)
        }
        fchmod(fd, 0o600)
        close(fd)
    }
}
