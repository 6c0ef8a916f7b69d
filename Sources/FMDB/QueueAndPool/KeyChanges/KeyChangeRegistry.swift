import Foundation

/// A queue or pool that can be told its database file was rekeyed through another queue or pool of
/// this process.
protocol KeyChangeListener: AnyObject, Sendable {
    /// The file is under `provider`'s key from now on: drop the connections keyed before, key new ones
    /// with it. Called on the rekeying caller's thread, outside any lock of the rekeying queue or pool.
    func adoptKeyProvider(_ provider: any KeyProvider)
}

/// Every keyed queue and pool of this process, by the path their connections open: a rekey through one of
/// them (`rekey(using:)`) hands the new provider to the others whose path leads to the file that was
/// rekeyed, whose connections would otherwise meet the file under a key they do not hold.
///
/// The registry follows the path, not a file identity taken once. When the rekey is announced, the file at
/// the rekeying member's path and the file at each other member's path are looked up again (stat(2):
/// device and inode, so two spellings of one path, a symbolic link or a hard link are the same file): a
/// member is told exactly when its path leads to the rekeyed file now. So queues and pools made before and
/// after the file at a path was replaced (a restore from a backup, an export renamed over it, a migration in
/// place) hear each other's rekeys, and a member whose path now leads to another file (the old one renamed
/// away, or another file renamed over it) is not handed a provider meant for a file it no longer opens.
/// A connection opened before the replacement still reads the old file; it is found by the key check before
/// a block (``KeyCheckFailure/replaced``) and a rekey never runs on it.
///
/// Sendable: `members` is read and written only inside `Protected`.
final class KeyChangeRegistry: Sendable {
    struct FileIdentity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64

        /// The identity of the file at `path` now; nil for a file that is not there.
        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    private struct Member {
        weak var listener: (any KeyChangeListener)?
        /// The absolute path the member's connections open.
        let path: String
    }

    static let shared = KeyChangeRegistry()

    private let members = Protected<[Member]>([])

    /// The path under which a queue or pool opened on `path` is registered: nil for an in-memory
    /// database or a URI (nothing to share); a relative path made absolute against the working directory
    /// now, as SQLite opens it.
    static func registeredPath(_ path: String?) -> String? {
        guard let path, !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return nil }
        if path.hasPrefix("/") { return path }
        return FileManager.default.currentDirectoryPath + "/" + path
    }

    /// Adds `listener`, whose connections open `path` (from ``registeredPath(_:)``; nil: nothing to share).
    func register(_ listener: any KeyChangeListener, path: String?) {
        guard let path else { return }
        members.withLock { table in
            // Drop members that are gone, so the table does not grow forever.
            table.removeAll { $0.listener == nil }
            table.append(Member(listener: listener, path: path))
        }
    }

    /// Tells every other live listener whose path leads to the file `rekeyed` (the file `source` just
    /// rekeyed, from ``FMDatabase/rekeyedFileIdentity(path:)``) that it is under `provider`'s key.
    func announce(_ provider: any KeyProvider, rekeyed: FileIdentity?, from source: AnyObject) {
        guard let rekeyed else { return }
        let others = members.withLock { table in
            table.compactMap { member in member.listener.map { ($0, member.path) } }.filter { $0.0 !== source }
        }
        // Looked up outside the lock: stat(2) of each member's path, now.
        for (listener, memberPath) in others where FileIdentity(path: memberPath) == rekeyed {
            listener.adoptKeyProvider(provider)
        }
    }
}
