import CSQLCipher
import Foundation

/// The one way the library creates a copy's file (``FMDatabaseCopy``: encrypt, decrypt, export, migrate, a
/// backup before a rekey):
///
/// 1. DEST is checked with lstat(2): anything there — a file, a FIFO, a symlink, even a dangling one —
///    "exists" and is refused unless replacing was asked for; a directory is always refused.
/// 2. A private directory is made beside DEST with mkdtemp(3) (mode 0700, whatever the umask), and the
///    new database is created in it with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600. SQLite puts the
///    database's `-journal` (and `-wal`/`-shm`) beside it, so inside the private directory too, with the
///    database file's mode. Nobody else can plant a link there, and no umask makes anything readable.
/// 3. When the copy is written and verified, the file gets its final mode (0600, or the source file's
///    mode where that is stricter) and is renamed into place with renameat2(RENAME_NOREPLACE), so a DEST
///    that appeared meanwhile is not replaced — unless replacing, where rename(2) replaces it (a symlink at
///    DEST is replaced, never followed). Where the file system has no RENAME_NOREPLACE, link(2) + unlink(2)
///    does the same; where it has neither, DEST is refused unless replacing.
/// 4. The private directory is removed, on success and on failure. The caller is told when it is made and
///    when a signal handler may no longer remove it (``FMDatabaseCopy/Stage``): the tool's handler removes
///    it on SIGINT, SIGTERM or SIGHUP until then. A SIGKILL, or a signal during the commit, can leave it
///    behind (`.DEST.fmdb-cipher-PID-XXXXXX`, 0700): never a partial DEST. The next copy that writes DEST
///    removes such a directory once its run no longer holds the directory's lock, unless it holds an old pair
///    (`removeInterruptedCopies`).
///
/// DEST and `DEST-keyslots` are a pair: a slot file opens only the database whose salt it holds. `DEST-keyslots`
/// is checked as DEST is before any work, whether or not the copy has slots. A copy of a slotted database
/// carries its slot file (`carriesSlotFile`): it is written beside the new file in the private directory
/// (`slotFile`: 0600, no link followed). When a slot file is involved (the copy has one, or replacing a DEST
/// that has one), `commit` holds the lock of `DEST-keyslots` (the one every slot change takes) and moves,
/// syncing the directories after each step:
///
/// 1. when replacing, the old pair into the private directory: a hard link `old.db-keyslots` to the old
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
/// `new.db` to DEST when `DEST-keyslots` is the new one, or run again replacing. A copy without slots that
/// replaces a slotted DEST removes `DEST-keyslots` (reported by `commit`): it would not open the new DEST.
final class PrivateOutput {
    /// DEST, as the caller named it.
    let destination: String
    /// The private directory beside DEST.
    let directory: String
    /// The new database, inside `directory`.
    let file: String
    /// Its key slot file (`new.db-keyslots`), when the copy has one.
    let slotFile: String
    /// Where replacing moves the old DEST (and `old.db-keyslots` its slot file) while the new pair goes in place.
    private let oldFile: String
    private let carriesSlotFile: Bool
    private let finalMode: mode_t
    private let force: Bool
    private let report: (FMDatabaseCopy.Stage) -> Void
    private var done = false
    /// Set when the old pair could not be put back: the private directory (which holds it) stays.
    private var keepsDirectory = false
    /// Whether the caller still may remove `directory` on a signal (told `.stagingDirectoryReleased` once not).
    private var removableBySignal = false
    /// A descriptor of `directory` holding an exclusive flock while this run lives (-1: none).
    private var directoryLock: Int32 = -1

    /// Checks DEST (`.destinationExists` when something is there and `force` is false, `.cannotCreate` when it
    /// cannot be created, `.sameFile` when it is SRC) and makes the private directory and the empty, private
    /// new file.
    init(
        destination: String, force: Bool, source: String?, carriesSlotFile: Bool = false,
        report: @escaping (FMDatabaseCopy.Stage) -> Void
    ) throws {
        let dest = URL(fileURLWithPath: destination).standardizedFileURL
        // What is at DEST (not followed if a link), read once for both checks below.
        var status = stat()
        let destinationExists = lstat(dest.path, &status) == 0
        if let source {
            let sourcePath = URL(fileURLWithPath: source).standardizedFileURL.path
            if dest.path == sourcePath {
                throw FMDatabaseCopy.failure(.sameFile, SQLITE_MISUSE, "DEST must differ from SRC")
            }
            // SRC's own files (its key slot file, the slot file's lock, SQLite's journal, WAL and shared memory)
            // are never DEST either, replacing or not: a slot file replaced by a copy loses the only wrapped
            // data key; a WAL replaced loses committed transactions.
            for suffix in Self.sourceSideFileSuffixes {
                let side = sourcePath + suffix
                if dest.path == side || (destinationExists && Self.sameFile(status, side)) {
                    throw FMDatabaseCopy.failure(
                        .sameFile, SQLITE_MISUSE, "DEST must not be one of SRC's own files (\(source)\(suffix))")
                }
            }
        }
        if destinationExists {
            if (status.st_mode & S_IFMT) == S_IFDIR {
                throw FMDatabaseCopy.failure(.cannotCreate, SQLITE_CANTOPEN, "\(destination): is a directory")
            }
            if let source, Self.sameFile(status, source) {
                throw FMDatabaseCopy.failure(
                    .sameFile, SQLITE_MISUSE, "DEST must differ from SRC (they are the same file)")
            }
            if !force {
                let what = (status.st_mode & S_IFMT) == S_IFLNK ? "a symbolic link" : "something"
                throw FMDatabaseCopy.failure(
                    .destinationExists, SQLITE_CANTOPEN,
                    "\(destination): already exists (\(what) is there; \(FMDatabaseCopy.replaceHint) to replace it)")
            }
        }
        try Self.refuseJournalFiles(of: destination)
        // DEST-keyslots too, for every copy: a slot file left beside a new DEST would not be its own.
        if lstat(KeySlots.slotFilePath(forDatabaseAt: dest.path), &status) == 0 {
            let slots = KeySlots.slotFilePath(forDatabaseAt: destination)
            if (status.st_mode & S_IFMT) == S_IFDIR {
                throw FMDatabaseCopy.failure(.cannotCreate, SQLITE_CANTOPEN, "\(slots): is a directory")
            }
            if !force {
                let action = carriesSlotFile ? "replace it" : "remove it: the new DEST has no key slots"
                throw FMDatabaseCopy.failure(
                    .destinationExists, SQLITE_CANTOPEN,
                    "\(slots): already exists (the key slot file of DEST; \(FMDatabaseCopy.replaceHint) to \(action))")
            }
        }
        let folder = dest.deletingLastPathComponent().path
        var folderStatus = stat()
        guard stat(folder, &folderStatus) == 0, (folderStatus.st_mode & S_IFMT) == S_IFDIR else {
            throw FMDatabaseCopy.failure(.cannotCreate, SQLITE_CANTOPEN, "\(folder): no such directory")
        }
        Self.removeInterruptedCopies(of: dest.lastPathComponent, in: folder, report: report)
        // The run's process id is in the name, so a later run can tell a directory whose run was killed.
        var template = Array("\(folder)/.\(dest.lastPathComponent).fmdb-cipher-\(getpid())-XXXXXX".utf8CString)
        // The caller may block signals from here until it has noted the directory (`.stagingDirectory`).
        report(.creatingStagingDirectory)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.map { mkdtemp($0) != nil } ?? false
        }
        let failure = errno
        guard made else {
            report(.stagingDirectory(nil))
            throw FMDatabaseCopy.failure(
                .cannotCreate, SQLITE_CANTOPEN,
                "cannot create a private directory in \(folder): \(FileSystem.describe(failure))")
        }
        directory = template.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { String(cString: $0) } ?? ""
        }
        file = directory + "/new.db"
        slotFile = KeySlots.slotFilePath(forDatabaseAt: file)
        oldFile = directory + "/old.db"
        self.carriesSlotFile = carriesSlotFile
        self.destination = destination
        self.force = force
        self.report = report
        // From here until the commit moves anything of the old DEST in, a signal handler may remove the directory.
        report(.stagingDirectory(directory))
        removableBySignal = true
        // Held for the run's life: a later run removes the directory only when nobody holds this lock.
        directoryLock = open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if directoryLock >= 0 { flock(directoryLock, LOCK_EX) }
        var mode: mode_t = 0o600
        if let source, stat(source, &status) == 0 { mode &= status.st_mode }
        finalMode = mode
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = FileSystem.describe(errno)
            discard()
            done = true
            throw FMDatabaseCopy.failure(
                .cannotCreate, SQLITE_CANTOPEN, "cannot create the new database beside \(destination): \(reason)")
        }
        // The umask may have removed bits SQLite needs (e.g. umask 0277); the file is ours alone anyway.
        fchmod(fd, 0o600)
        close(fd)
    }

    deinit {
        if !done { discard() }
        if directoryLock >= 0 { close(directoryLock) }
    }

    /// The files that belong to a database beside it: its key slot file and that file's lock, SQLite's journal,
    /// WAL and shared memory.
    static let sourceSideFileSuffixes = ["-keyslots", "-keyslots.lock", "-journal", "-wal", "-shm"]

    private static func sameFile(_ status: stat, _ other: String) -> Bool {
        var otherStatus = stat()
        return stat(other, &otherStatus) == 0
            && otherStatus.st_dev == status.st_dev && otherStatus.st_ino == status.st_ino
    }

    /// Gives the new file its final mode and moves it (and its slot file) to DEST without replacing anything
    /// unless `force`; see the type's comment for the order when a slot file is involved.
    /// - Returns: whether an old `DEST-keyslots` was removed (a copy without slots replacing a slotted DEST).
    @discardableResult
    func commit() throws -> Bool {
        do {
            try Self.refuseJournalFiles(of: destination)
        } catch {
            discard()
            throw error
        }
        guard chmod(file, finalMode) == 0 else {
            let reason = FileSystem.describe(errno)
            discard()
            throw Self.ioError("cannot set the mode of the new database: \(reason)")
        }
        let slotDestination = KeySlots.slotFilePath(forDatabaseAt: destination)
        guard carriesSlotFile || (force && Self.exists(slotDestination)) else {
            // No slot file on either side: one rename, DEST is the old file or the new one at every instant.
            defer { discard() }
            var placed = stat()
            let identified = lstat(file, &placed) == 0
            // From the rename on, DEST is the finished file: a signal handler must no longer treat the private
            // directory as partial output (and a program may stop taking signals as a failure from here).
            releaseFromSignalHandler()
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
            return false
        }
        // No slot change of the old DEST (or of a DEST made meanwhile) may land between the moves.
        let removedOldSlotFile = try KeySlotStorage.withExclusiveLock(forSlotFile: slotDestination) {
            try commitPair(slotDestination: slotDestination)
        }
        return removedOldSlotFile && !carriesSlotFile
    }

    /// One step of a commit, to be undone if a later one fails.
    private enum Step {
        /// The old DEST was moved to `aside`.
        case movedAside(original: String, aside: String)
        /// The old slot file at `original` was replaced or removed; `aside` is a hard link to it (or it was
        /// moved there).
        case removedSlotFile(original: String, aside: String)
        /// The new slot file was moved to `path` (identified by device and inode).
        case placed(path: String, device: UInt64, inode: UInt64)
    }

    /// Steps 1-4 of the type's comment. Returns whether an old `DEST-keyslots` was replaced or removed.
    private func commitPair(slotDestination: String) throws -> Bool {
        // The old pair may move into the private directory: a signal handler must no longer remove it.
        releaseFromSignalHandler()
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
                    throw Self.ioError(
                        "cannot remove \(slotDestination), the key slot file of the DEST being replaced: "
                            + FileSystem.describe(errno))
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
            let cause = error as? FMDatabaseError
            let message = cause?.message ?? "\(destination): \(error.localizedDescription)"
            let code = cause?.extendedCode ?? SQLITE_IOERR
            let notRestored = undo(steps)
            if notRestored.isEmpty {
                discard()
                done = true
                let note = force ? "; \(destination) and its key slot file are as they were" : ""
                throw FMDatabaseError(
                    code: code, message: message + note, marks: [], copyFailure: cause?.copyFailure)
            }
            keepsDirectory = true
            discard()
            done = true
            throw FMDatabaseError(
                code: code,
                message: message + "; could not put back " + notRestored.joined(separator: ", ")
                    + ": move them back by hand", marks: [], copyFailure: cause?.copyFailure)
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
                if !FileSystem.moveWithoutReplacing(aside, to: original) {
                    notRestored.append("\(aside) (was \(original))")
                }
            }
        }
        if !steps.isEmpty { _ = try? syncDirectories() }
        return notRestored
    }

    /// Moves the old DEST or its slot file into the private directory (nothing is there: `old.db` is this run's name).
    private func moveAside(_ path: String, to aside: String, what: String) throws {
        guard FileSystem.moveWithoutReplacing(path, to: aside) else {
            throw Self.ioError("cannot move \(what) (\(path)) aside: \(FileSystem.describe(errno))")
        }
    }

    /// A `DEST-wal` or `DEST-journal` that SQLite would replay belongs to the DEST that is there (open in
    /// another program, or not closed cleanly), or to none: SQLite would apply it to whatever file is at DEST
    /// next, so a new DEST beside one would be corrupted at its first open. Refused, even when replacing
    /// (`.destinationInUse` when DEST is there, `.cannotCreate` when it is not), before anything is written and
    /// again right before the commit. Only a file that starts with its format's magic number counts (the WAL's
    /// 0x377f0682/3, the journal's 0xd9d505f9; their headers are not encrypted): an empty or zeroed one, as
    /// journal_mode TRUNCATE and PERSIST leave, is not replayed.
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
                throw FMDatabaseCopy.failure(
                    .cannotCreate, SQLITE_CANTOPEN,
                    "\(destination)\(suffix): is not a regular file (\(specialFileKind(status.st_mode))): "
                        + "SQLite would open it beside the new database; remove it, then run again")
            }
            guard count == 4, magic[suffix]?.contains(head) == true else { continue }
            if exists(destination) {
                throw FMDatabaseCopy.failure(
                    .destinationInUse, SQLITE_BUSY,
                    "\(destination)\(suffix): exists: DEST is open in another program or was not closed cleanly, "
                        + "and SQLite would apply that file to the new database; close the program, or open DEST once "
                        + "with its key so SQLite finishes it, then run again")
            }
            throw FMDatabaseCopy.failure(
                .cannotCreate, SQLITE_CANTOPEN,
                "\(destination)\(suffix): exists without \(destination): SQLite would apply it to the new "
                    + "database; remove it if it is not needed, then run again")
        }
    }

    private static func specialFileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: return "a directory"
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "not a file"
        }
    }

    private static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    private static func ioError(_ message: String) -> FMDatabaseError {
        FMDatabaseError(code: FileSystem.resultCode(forSystemError: errno) ?? SQLITE_IOERR, message: message)
    }

    /// fsync of DEST's directory and of the private directory: each rename between them reaches the disk in
    /// order. A failure throws: a step whose rename may not survive a power loss is not reported done.
    private func syncDirectories() throws {
        for folder in [URL(fileURLWithPath: destination).deletingLastPathComponent().path, directory] {
            let failure = FileSystem.syncDirectory(folder)
            guard failure == 0 else {
                errno = failure
                throw Self.ioError(
                    "cannot sync the directory \(folder): \(FileSystem.describe(failure)); the new database "
                        + "is not in place")
            }
        }
    }

    /// Moves `from` to `to`: replacing what is there when `force`, never otherwise.
    private func move(_ from: String, to target: String, what: String) throws {
        if force {
            guard rename(from, target) == 0 else {
                throw Self.ioError(
                    "cannot move the new \(what) into place at \(target): \(FileSystem.describe(errno))")
            }
        } else {
            try moveWithoutReplacing(from, to: target, what: what)
        }
    }

    private func moveWithoutReplacing(_ from: String, to target: String, what: String) throws {
        if FileSystem.renameWithoutReplacing(from, to: target) { return }
        var failure = errno
        if failure == EINVAL || failure == ENOSYS || failure == EOPNOTSUPP {
            // No RENAME_NOREPLACE here: link(2) fails with EEXIST too, and never follows a link at DEST.
            if link(from, target) == 0 {
                unlink(from)
                return
            }
            failure = errno
            if failure == EPERM || failure == EOPNOTSUPP {
                throw FMDatabaseCopy.failure(
                    .cannotCreate, SQLITE_CANTOPEN,
                    "\(target): this file system can neither rename without replacing nor link, so the "
                        + "copy cannot be sure not to replace a file created meanwhile; "
                        + "\(FMDatabaseCopy.replaceHint) to replace it")
            }
        }
        if failure == EEXIST {
            throw FMDatabaseCopy.failure(
                .destinationExists, SQLITE_CANTOPEN,
                "\(target): appeared while the new \(what) was being written, and was not replaced "
                    + "(\(FMDatabaseCopy.replaceHint) to replace it)")
        }
        errno = failure
        throw Self.ioError("cannot move the new \(what) into place at \(target): \(FileSystem.describe(failure))")
    }

    /// Removes what a killed run (SIGKILL, a crash, a power loss) left in its private directory beside DEST:
    /// a partial or unpublished copy (`new.db` and its side files: a decrypt's is plaintext; its slot file and
    /// that file's temporary, `.new.db-keyslots.tmp-PID-X`). Only directories
    /// of this user whose run's process is gone, and never one that holds an old pair (`old.db`, which a
    /// crash during a replacing commit leaves for the user to move back, see the type's comment).
    static func removeInterruptedCopies(
        of name: String, in folder: String, report: (FMDatabaseCopy.Stage) -> Void
    ) {
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
            // And the temporary file of a slot file write the kill interrupted (`.new.db-keyslots.tmp-PID-X`):
            // listed by path, removed through the checked descriptor, so only names inside that directory go.
            let temporaryPrefix = "." + KeySlots.slotFilePath(forDatabaseAt: "new.db") + KeySlotStorage.temporaryMarker
            let temporaries = ((try? FileManager.default.contentsOfDirectory(atPath: "\(folder)/\(entry)")) ?? [])
                .filter { $0.hasPrefix(temporaryPrefix) }
            for file in ["new.db", "new.db-journal", "new.db-wal", "new.db-shm", "new.db-keyslots"] + temporaries {
                unlinkat(directoryFD, file, 0)
            }
            if unlinkat(folderFD, entry, AT_REMOVEDIR) == 0 {
                report(.removedInterruptedCopy(directory: "\(folder)/\(entry)"))
            }
        }
    }

    /// Tells the caller that a signal handler may no longer remove the private directory.
    private func releaseFromSignalHandler() {
        guard removableBySignal else { return }
        removableBySignal = false
        report(.stagingDirectoryReleased(directory))
    }

    /// Removes the new file (if still there), SQLite's side files, the slot file, the old pair a replacing commit
    /// moved aside (unless it could not be put back) and the private directory. A removal that fails (an I/O
    /// error) is tried once more; a directory still there then is ``leftDirectory``.
    func discard() {
        // After the removal: a signal meanwhile removes what is left.
        defer { releaseFromSignalHandler() }
        for attempt in 1...2 {
            for suffix in ["", "-journal", "-wal", "-shm"] { unlink(file + suffix) }
            unlink(slotFile)
            guard !keepsDirectory else { return }
            unlink(oldFile)
            unlink(KeySlots.slotFilePath(forDatabaseAt: oldFile))
            if rmdir(directory) == 0 || errno == ENOENT {
                leftDirectory = nil
                return
            }
            if attempt == 2 { leftDirectory = (directory, FileSystem.describe(errno)) }
        }
    }

    /// The private directory and why it could not be removed, when ``discard()`` failed to remove it twice: it
    /// holds nothing of a published copy, and is removed by the next copy to DEST once this process is gone
    /// (``removeInterruptedCopies(of:in:report:)``).
    private(set) var leftDirectory: (path: String, reason: String)?

    /// What a failed run throws instead of `error`: everything this output made is discarded first, and when
    /// the private directory could not be removed, the error (an ``FMDatabaseError``, its code and details
    /// kept) also says where it is and that it holds nothing of DEST.
    func failing(_ error: Error) -> Error {
        discard()
        guard let left = leftDirectory, let error = error as? FMDatabaseError else { return error }
        return error.appending(
            "; the private directory \(left.path) could not be removed (\(left.reason)): it holds nothing of "
                + "\(destination), and the next copy to \(destination) removes it, or remove it yourself")
    }

    /// ``leftDirectory`` as an error that says it, for a caller to report (nil: nothing left).
    var leftDirectoryError: FMDatabaseError? {
        leftDirectory.map { left in
            FMDatabaseError(
                code: SQLITE_IOERR | (10 << 8),  // SQLITE_IOERR_DELETE (a macro Swift does not import)
                message:
                    "the private directory \(left.path) could not be removed after \(destination) was put in place "
                    + "(\(left.reason)); it holds nothing \(destination) needs: the next copy to \(destination) "
                    + "removes it, or remove it yourself")
        }
    }
}
