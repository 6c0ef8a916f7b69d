import Foundation
import Synchronization

/// A queue or pool that can be told its database file was rekeyed through another queue or pool of
/// this process.
protocol KeyChangeListener: AnyObject, Sendable {
    /// The file is under `provider`'s key from now on: drop the connections keyed before, key new ones
    /// with it. Called on the rekeying caller's thread, outside any lock of the rekeying queue or pool.
    func adoptKeyProvider(_ provider: any KeyProvider)
}

/// Every keyed queue and pool of this process, by the identity of their database file (device and
/// inode, so two spellings of one path, or a symbolic link, are the same file): a rekey through one of
/// them (`rekey(using:)`) hands the new provider to the others on the same file, whose connections would
/// otherwise meet the file under a key they do not hold.
///
/// Sendable: `members` is read and written only inside `Protected`.
final class KeyChangeRegistry: Sendable {
    struct FileIdentity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64

        /// The identity of the file at `path` now; nil for an in-memory database or a file that is gone.
        init?(path: String?) {
            guard let path, !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return nil }
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    private struct Member {
        weak var listener: (any KeyChangeListener)?
    }

    static let shared = KeyChangeRegistry()

    private let members = Protected<[FileIdentity: [Member]]>([:])

    /// Adds `listener` for the file with `identity` (nil: nothing to share).
    func register(_ listener: any KeyChangeListener, identity: FileIdentity?) {
        guard let identity else { return }
        members.withLock { table in
            table[identity, default: []].removeAll { $0.listener == nil }
            table[identity, default: []].append(Member(listener: listener))
            // Drop files whose queues and pools are all gone, so the table does not grow forever.
            table = table.filter { !$0.value.allSatisfy { $0.listener == nil } }
        }
    }

    /// Tells every other live listener of the file that it is under `provider`'s key now.
    func announce(_ provider: any KeyProvider, for identity: FileIdentity?, from source: AnyObject) {
        guard let identity else { return }
        let others = members.withLock { table in
            (table[identity] ?? []).compactMap(\.listener).filter { $0 !== source }
        }
        for listener in others { listener.adoptKeyProvider(provider) }
    }
}

extension FMDatabase {
    /// True when this keyed connection, which opened the file before, now finds it under a key it does not
    /// hold (SQLITE_NOTADB reading the schema's header): the file was rekeyed, or its data key rotated,
    /// elsewhere. Cheap when nothing changed: the header page is in the connection's cache, and the check's
    /// statement is prepared once per connection (BENCHMARKS.md, "The per-block key check"). Any other
    /// outcome (the file reads, or another error such as a lock) is false: the caller's own work meets it.
    func isUnderAnotherKey() -> Bool {
        asOwner { underAnotherKey() }
    }

    /// The check's SQL: reading the schema cookie reads page 1, which a key change makes unreadable.
    private static let keyCheckSQL = "PRAGMA schema_version"

    /// Before a block: `isUnderAnotherKey()`, left out when this connection read the file under its key
    /// less than ``keyCheckInterval`` ago (it then served the block before this one).
    ///
    /// Under a service's load a check is a read transaction of its own that another connection's writes
    /// make cost about 2 µs and a wait on SQLite's locks, before every read (BENCHMARKS.md, "The per-block
    /// key check"). Left out, a key change that lands in the interval is met by the block's own first
    /// statement instead: that block fails with code 26, as one running at the change does, and its
    /// connection is closed at check-in. So at most one block per connection fails per key change, as
    /// before; the interval only widens "running at the change" to "started within a millisecond of it".
    func isUnderAnotherKeyBeforeBlock() -> Bool {
        asOwner {
            let now = DispatchTime.now().uptimeNanoseconds
            let interval = Self.keyCheckInterval.load(ordering: .relaxed)
            if keyConfirmedAt != 0, now &- keyConfirmedAt < interval { return false }
            return underAnotherKey(confirmedAt: now)
        }
    }

    /// How long (nanoseconds) a connection that read the file under its key before a block is not checked
    /// again: 1 ms. Tests set it (0: check before every block).
    static let keyCheckInterval = Atomic<UInt64>(1_000_000)

    /// `confirmedAt`: when the check started (0: not before a block); recorded when the file read under
    /// this connection's key.
    private func underAnotherKey(confirmedAt: UInt64 = 0) -> Bool {
        guard let connection else { return false }
        // Kept in the connection's statement cache whatever `shouldCacheStatements` says (only the FMDB
        // query paths look there when it is false, and never for this SQL); finalized when the connection closes.
        let statement: Statement
        if let cached = statementCache.take(Self.keyCheckSQL) {
            statement = cached
        } else {
            do {
                statement = try connection.prepare(Self.keyCheckSQL)
            } catch let error as FMDatabaseError {
                return error.resultCode == SQLITE_NOTADB
            } catch {
                return false
            }
            statementCache.insert(statement)
        }
        statement.inUse = true
        defer {
            statement.inUse = false
            statement.reset()
        }
        let code = statement.step()
        if code == SQLITE_ROW, confirmedAt != 0 { keyConfirmedAt = confirmedAt }
        return code & 0xFF == SQLITE_NOTADB
    }

    /// After a block of a keyed queue or pool: true when it met SQLITE_NOTADB and the connection is
    /// indeed under another key now (checked, so an attached file's own error does not count).
    func metAnotherKey() -> Bool {
        asOwner { (lastErrorCode() & 0xFF) == SQLITE_NOTADB } && isUnderAnotherKey()
    }

    /// The error a block gets when the file was rekeyed under it: the same code, and what happened.
    static func keyChangedError(path: String?, cause: Error) -> FMDatabaseError {
        FMDatabaseError(
            code: (cause as? FMDatabaseError)?.extendedCode ?? SQLITE_NOTADB,
            message:
                "The database at \(path ?? ":memory:") was rekeyed while this block ran, or less than a millisecond "
                + "before it started (its key was changed elsewhere after this connection last read the file): the "
                + "block was stopped and is not run again; its connection was closed, and the next one is opened "
                + "with the key provider asked again.")
    }
}
