import Foundation

/// The files an open of a database may create (the database, its `-journal`, `-wal` and `-shm`, and the
/// key slots' `-keyslots.lock`), noted before the open, so that an open, keying, verification or set-up
/// that fails can remove the ones it created and leave the directory as it found it.
///
/// Only files that did not exist when the note was taken are removed: a database that was there before
/// (even an empty one) is never touched. (Two parties creating the same new database at the same instant
/// is a race either way; one of them fails.)
struct CreatedFiles {
    /// The paths that did not exist when noted.
    private let missing: [String]
    /// The database file this open made (device and inode), read right after the open; nil until then.
    private var identity: (device: UInt64, inode: UInt64)?
    /// The file's size and modification time after this open's own first write (keying a new file writes its
    /// first page); nil when it wrote nothing.
    private var ownWrite: (size: Int64, modified: timespec)?

    /// Notes which of the files of the database at `path` do not exist yet. Nil for in-memory and
    /// temporary databases and URI filenames, which name no file here.
    init?(databasePath path: String?) {
        guard let path, !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return nil }
        let candidates = [path, path + "-journal", path + "-wal", path + "-shm", path + "-keyslots.lock"]
        missing = candidates.filter { !Self.exists($0) }
        guard missing.first == path else { return nil }  // The database existed: nothing of it is new.
    }

    /// Records the identity of the database file the open just made. Call right after the open.
    mutating func noteOpened() {
        guard let path = missing.first, let status = Self.status(path) else { return }
        identity = (UInt64(status.st_dev), UInt64(status.st_ino))
    }

    /// Records the file as this open's own first write left it (after keying a new file).
    mutating func noteOwnWrite() {
        guard let path = missing.first, let status = Self.status(path) else { return }
        ownWrite = (Int64(status.st_size), status.st_mtim)
    }

    /// Whether the database file itself was created since the note.
    var databaseWasCreated: Bool {
        guard let path = missing.first else { return false }
        return Self.exists(path)
    }

    /// Removes what the open made, and only that: the database file when it is still the file this open
    /// made (same device and inode) and holds nothing but what this open wrote (empty, or unchanged since
    /// its own keying: another party that opened it meanwhile and wrote to it keeps it), then the side files
    /// noted missing — never a side file of a database that stays. Call only after the connection that
    /// created them is closed.
    func removeCreated() {
        guard let path = missing.first, let identity, let now = Self.status(path),
            UInt64(now.st_dev) == identity.device, UInt64(now.st_ino) == identity.inode,
            (now.st_mode & S_IFMT) == S_IFREG, now.st_size == 0 || Self.unchanged(now, since: ownWrite)
        else { return }
        // Another connection holding a journal or WAL means the file is in use: leave everything.
        for side in missing.dropFirst() where side.hasSuffix("-wal") || side.hasSuffix("-journal") {
            if let status = Self.status(side), status.st_size > 0 { return }
        }
        guard unlink(path) == 0 else { return }
        for side in missing.dropFirst().reversed() where Self.exists(side) {
            unlink(side)
        }
    }

    /// Whether nobody wrote to the file after this open's own first write.
    private static func unchanged(_ now: stat, since write: (size: Int64, modified: timespec)?) -> Bool {
        guard let write else { return false }
        return Int64(now.st_size) == write.size && now.st_mtim.tv_sec == write.modified.tv_sec
            && now.st_mtim.tv_nsec == write.modified.tv_nsec
    }

    private static func status(_ path: String) -> stat? {
        var status = stat()
        return lstat(path, &status) == 0 ? status : nil
    }

    private static func exists(_ path: String) -> Bool {
        status(path) != nil
    }
}
