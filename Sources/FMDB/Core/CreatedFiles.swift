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

    /// Notes which of the files of the database at `path` do not exist yet. Nil for in-memory and
    /// temporary databases and URI filenames, which name no file here.
    init?(databasePath path: String?) {
        guard let path, !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return nil }
        let candidates = [path, path + "-journal", path + "-wal", path + "-shm", path + "-keyslots.lock"]
        missing = candidates.filter { !Self.exists($0) }
        guard missing.first == path else { return nil }  // The database existed: nothing of it is new.
    }

    /// Whether the database file itself was created since the note.
    var databaseWasCreated: Bool {
        guard let path = missing.first else { return false }
        return Self.exists(path)
    }

    /// Removes every file noted missing that exists now. Call only after the connection that created
    /// them is closed.
    func removeCreated() {
        for path in missing.reversed() where Self.exists(path) {
            unlink(path)
        }
    }

    private static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }
}
