import FMDB
import Foundation

/// Checks on the files the tool reads, and what an error means once a database has opened.
enum InputFiles {
    /// Refuses anything that is not a regular file (links the user named are followed), exit 66: reading
    /// a FIFO would hang, and /dev/zero reads as an empty database. stat(2) never blocks, so this runs
    /// before anything opens the path. A missing path or a directory is left to the caller's own message.
    ///
    /// The files SQLite and the key slots open beside it (`-journal`, `-wal`, `-shm`, `-keyslots`) are checked
    /// the same way, when they exist: a FIFO there would hang the open that SQLite or the slot code makes.
    static func requireRegularFile(_ path: String) throws {
        if let what = specialFileKind(path) {
            throw CLIError("\(path): is not a regular file (\(what)), so not a database file", code: Exit.noInput)
        }
        for suffix in sideFileSuffixes {
            if let what = specialFileKind(path + suffix) {
                throw CLIError(
                    "\(path)\(suffix): is not a regular file (\(what)); SQLite or the key slots would open it "
                        + "beside the database: remove it", code: Exit.noInput)
            }
        }
    }

    /// The files beside a database that SQLite (`-journal`, `-wal`, `-shm`) or the key slots (`-keyslots`) open.
    static let sideFileSuffixes = ["-journal", "-wal", "-shm", "-keyslots"]

    /// What `path` is when it exists and is neither a regular file nor a directory (stat(2): links followed,
    /// never blocks); nil otherwise.
    static func specialFileKind(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        switch status.st_mode & S_IFMT {
        case S_IFREG, S_IFDIR: return nil
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "an unknown kind"
        }
    }

    /// Whether SQLite may have to recover `path` before it can be read (a journal or WAL left beside it,
    /// as after a crash): a read-only connection cannot roll a hot journal back.
    static func mayNeedRecovery(_ path: String) -> Bool {
        for suffix in ["-journal", "-wal"] {
            var status = stat()
            if stat(path + suffix, &status) == 0, status.st_size > 0 { return true }
        }
        return false
    }

    /// Whether another process holds one of SQLite's locks on `path` (fcntl F_GETLK, which takes none): any lock
    /// in the database file's lock bytes (a reader's, a writer's; a WAL connection holds its shared lock while
    /// open), or the `-shm` lock every WAL connection holds. A journal or WAL beside a database in use is that
    /// process's, not a crash's. Call it with no connection of this process open to `path`: closing the
    /// descriptor it opens would drop their locks.
    static func lockedByAnotherProcess(_ path: String) -> Bool {
        // SQLite's unix VFS: PENDING_BYTE 0x40000000, then RESERVED and the 510 SHARED bytes; the -shm's
        // "dead man switch" byte at 128.
        isLocked(path, start: 0x4000_0000, length: 512) || isLocked(path + "-shm", start: 128, length: 1)
    }

    private static func isLocked(_ path: String, start: off_t, length: off_t) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = start
        lock.l_len = length
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return false }
        return lock.l_type != Int16(F_UNLCK)
    }

}
