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
/// 4. The private directory is removed, on success and on failure. A killed run can leave it behind
///    (`.DEST.fmdb-cipher-XXXXXX`, 0700): never a partial DEST.
///
/// A copy of a slotted database carries its slot file (`carriesSlotFile`): `DEST-keyslots` is checked
/// as DEST is (exit 73 unless --force) before any work, the slot file is written beside the new file in
/// the private directory (`slotFile`, by the library: 0600, no link followed), and `commit` moves it to
/// `DEST-keyslots` first, syncs the directory, then moves the database: whoever sees DEST sees its slot
/// file. If the database cannot be moved, the slot file this run placed is removed again. A crash
/// between the two renames leaves `DEST-keyslots` (wrapped keys only, byte for byte SRC's) without DEST,
/// and the verified copy in the private directory: move `.DEST.fmdb-cipher-XXXXXX/new.db` to DEST, or
/// remove `DEST-keyslots` and run again.
final class PrivateOutput {
    /// DEST, as the user named it.
    let destination: String
    /// The private directory beside DEST.
    let directory: String
    /// The new database, inside `directory`.
    let file: String
    /// Its key slot file (`new.db-keyslots`), when the copy has one.
    let slotFile: String
    private let carriesSlotFile: Bool
    private let finalMode: mode_t
    private let force: Bool
    private var done = false

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
                throw CLIError("\(destination): already exists (\(what) is there; use --force to replace it)",
                               code: Exit.cannotCreate)
            }
        }
        if carriesSlotFile, lstat(KeySlots.slotFilePath(forDatabaseAt: dest.path), &status) == 0 {
            let slots = KeySlots.slotFilePath(forDatabaseAt: destination)
            if (status.st_mode & S_IFMT) == S_IFDIR {
                throw CLIError("\(slots): is a directory", code: Exit.cannotCreate)
            }
            if !force {
                throw CLIError("\(slots): already exists (the key slot file of DEST; use --force to replace it)", code: Exit.cannotCreate)
            }
        }
        let folder = dest.deletingLastPathComponent().path
        var folderStatus = stat()
        guard stat(folder, &folderStatus) == 0, (folderStatus.st_mode & S_IFMT) == S_IFDIR else {
            throw CLIError("\(folder): no such directory", code: Exit.cannotCreate)
        }
        var template = Array("\(folder)/.\(dest.lastPathComponent).fmdb-cipher-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }
        }
        guard made != nil else {
            throw CLIError("cannot create a private directory in \(folder): \(String(cString: strerror(errno)))",
                           code: Exit.cannotCreate)
        }
        directory = template.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { String(cString: $0) } ?? ""
        }
        file = directory + "/new.db"
        slotFile = KeySlots.slotFilePath(forDatabaseAt: file)
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
            throw CLIError("cannot create the new database beside \(destination): \(reason)", code: Exit.cannotCreate)
        }
        // The umask may have removed bits SQLite needs (e.g. umask 0277); the file is ours alone anyway.
        fchmod(fd, 0o600)
        close(fd)
    }

    deinit {
        if !done { discard() }
    }

    private static func sameFile(_ status: stat, _ other: String) -> Bool {
        var otherStatus = stat()
        return stat(other, &otherStatus) == 0
            && otherStatus.st_dev == status.st_dev && otherStatus.st_ino == status.st_ino
    }

    /// Gives the new file its final mode and moves it to DEST without replacing anything unless --force.
    func commit() throws {
        defer { discard() }
        guard chmod(file, finalMode) == 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIError("cannot set the mode of the new database: \(reason)", code: Exit.ioError)
        }
        // The slot file first: a DEST that exists always has its slot file beside it.
        var placedSlotFile: stat?
        if carriesSlotFile {
            let slotDestination = KeySlots.slotFilePath(forDatabaseAt: destination)
            try move(slotFile, to: slotDestination, what: "key slot file")
            var placed = stat()
            if lstat(slotDestination, &placed) == 0 { placedSlotFile = placed }
            // Both renames reach the disk in this order (the directory's entries are synced in between).
            let folder = open(URL(fileURLWithPath: destination).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if folder >= 0 {
                fsync(folder)
                close(folder)
            }
        }
        do {
            try move(file, to: destination, what: "database")
        } catch {
            // Not the half of a copy: the slot file this run placed goes again (only if it is still ours).
            var now = stat()
            let slotDestination = KeySlots.slotFilePath(forDatabaseAt: destination)
            if let placed = placedSlotFile, lstat(slotDestination, &now) == 0, now.st_dev == placed.st_dev, now.st_ino == placed.st_ino {
                unlink(slotDestination)
            }
            throw error
        }
        done = true
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
                throw CLIError("\(target): this file system can neither rename without replacing nor link, so the "
                                + "tool cannot be sure not to replace a file created meanwhile; use --force",
                               code: Exit.cannotCreate)
            }
        }
        if failure == EEXIST {
            throw CLIError("\(target): appeared while the new \(what) was being written, and was not replaced "
                            + "(use --force to replace it)", code: Exit.cannotCreate)
        }
        let reason = String(cString: strerror(failure))
        throw CLIError("cannot move the new \(what) into place at \(target): \(reason)", code: Exit.ioError)
    }

    /// Removes the new file (if still there), SQLite's side files, the slot file and the private directory.
    func discard() {
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(file + suffix) }
        unlink(slotFile)
        rmdir(directory)
    }

    /// Creates an empty file at `path` for a new database (`sql` on a missing file): mode 0600 whatever the
    /// umask, O_EXCL|O_NOFOLLOW so a file or link that is already there (a dangling symlink included) is
    /// refused with exit 73, never followed or replaced. SQLite gives the journal the same mode.
    static func createEmptyDatabase(at path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason = errno == EEXIST
                ? "something is already there (a symbolic link?)"
                : String(cString: strerror(errno))
            throw CLIError("cannot create the database \(path): \(reason)", code: Exit.cannotCreate)
        }
        fchmod(fd, 0o600)
        close(fd)
    }
}
