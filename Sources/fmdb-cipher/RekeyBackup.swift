import FMDB
import Foundation

/// The `--backup PATH` of a rekey (and `PATH-keyslots` with `--data-key`): written before the rekey, removed
/// again when the rekey did not take, so that the retry is not refused for the file its own failed run left
/// (exit 73).
///
/// Removing it is safe only while the database itself is a copy under the old key: it is removed only when
/// a fresh read-only connection opens every page of the database with the old key (checked, not inferred from
/// the rekey's error), only if this run made it (nothing was at PATH or PATH-keyslots before: with `--force`
/// over an existing backup, the new one stays, and the retry with `--force` replaces it), and only while the
/// file at PATH is still the one this run published. Otherwise it stays, and the message says why.
final class RekeyBackup {
    let path: String
    private let existedBefore: Bool
    private var published: (device: UInt64, inode: UInt64)?

    init(_ path: String) {
        self.path = path
        existedBefore = Self.identity(path) != nil || Self.identity(KeySlots.slotFilePath(forDatabaseAt: path)) != nil
    }

    /// The backup is verified and in place: its identity, to remove it only while it is still this file.
    func written() {
        published = Self.identity(path)
    }

    /// The rekey of `database` failed before it changed the key (or could not start): removes the backup when
    /// `oldKeyOpens` (a check on the database) says the old key still opens every page, and says so on
    /// standard error.
    func discardAfterFailedRekey(of database: String, oldKeyOpens: () -> Bool) {
        guard let published, !existedBefore else { return }
        guard let now = Self.identity(path), now == published else { return }
        guard oldKeyOpens() else {
            Output.message(
                "fmdb-cipher: note: kept the backup \(path): the database could not be checked to open with the old "
                    + "key; once it does (fmdb-cipher check \(database)), remove the backup before retrying, or "
                    + "retry with --force")
            return
        }
        var removed: [String] = []
        for file in [path, KeySlots.slotFilePath(forDatabaseAt: path)] where Self.identity(file) != nil {
            guard unlink(file) == 0 else {
                let reason = String(cString: strerror(errno))
                Output.message(
                    "fmdb-cipher: note: could not remove \(file), left by this failed rekey (\(reason)): remove it "
                        + "before retrying, or retry with --force")
                return
            }
            removed.append(file)
        }
        Output.message(
            "fmdb-cipher: note: removed the backup \(removed.joined(separator: " and ")): the rekey did not take and "
                + "the database still opens with the old key (the retry writes a new backup)")
    }

    private static func identity(_ path: String) -> (device: UInt64, inode: UInt64)? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }
}
