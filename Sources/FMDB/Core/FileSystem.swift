import CSQLCipher
import Foundation

/// The file-system calls the library's careful writers share: what an operating-system error means as
/// a SQLite result code, a directory `fsync`, and a rename that never replaces.
enum FileSystem {
    /// The SQLite result code a failed system call's `errno` stands for: a full disk or quota
    /// (`ENOSPC`, `EDQUOT`) is `SQLITE_FULL`, a read-only file system (`EROFS`) `SQLITE_READONLY`, an I/O
    /// error (`EIO`) `SQLITE_IOERR`; nil for any other number, whose meaning depends on the call.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/rescode.html>
    static func resultCode(forSystemError number: Int32) -> Int32? {
        switch number {
        case ENOSPC, EDQUOT: return SQLITE_FULL
        case EROFS: return SQLITE_READONLY
        case EIO: return SQLITE_IOERR
        default: return nil
        }
    }

    /// `fsync` of the directory `path`, so that a rename or link in it survives a power loss.
    /// - Returns: 0 when it synced, else the `errno` of the failed `open` or `fsync`.
    static func syncDirectory(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        while fsync(fd) != 0 {
            guard errno == EINTR else { return errno }
        }
        return 0
    }

    /// `fsync` of the directory that holds `path`; 0 or the `errno`, as `syncDirectory(_:)`.
    static func syncDirectory(containing path: String) -> Int32 {
        syncDirectory(URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }

    /// rename(2) that fails with `EEXIST` instead of replacing `target` (`renameat2` with
    /// `RENAME_NOREPLACE`); `EINVAL` or `ENOSYS` where the file system or kernel cannot.
    /// - Returns: whether `from` is now at `target`; `errno` says why not.
    static func renameWithoutReplacing(_ from: String, to target: String) -> Bool {
        fmdb_rename_noreplace(from, target) == 0
    }

    /// `renameWithoutReplacing`, or link(2) + unlink(2) where the file system has no `RENAME_NOREPLACE`
    /// (link(2) fails with `EEXIST` too, and never follows a link at `target`).
    /// - Returns: whether `from` is now at `target`; `errno` says why not.
    static func moveWithoutReplacing(_ from: String, to target: String) -> Bool {
        if renameWithoutReplacing(from, to: target) { return true }
        guard errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP else { return false }
        guard link(from, target) == 0 else { return false }
        unlink(from)
        return true
    }

    /// The text of `errno` value `number` (strerror).
    static func describe(_ number: Int32) -> String {
        String(cString: strerror(number))
    }
}
