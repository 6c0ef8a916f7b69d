import CToolSupport
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
/// file at PATH is still the one this run published. That last check comes after the page check (which may
/// take minutes) and is made on the file itself: a descriptor kept open since publication pins its inode (so
/// the number cannot be reused by another run's file), and the file is first renamed to a private name in its
/// directory, compared there with the kept descriptor, then unlinked, or put back (never over a file that
/// appeared meanwhile). `PATH-keyslots` is touched only with `--data-key`, which writes it, and the same way.
/// Otherwise it stays, and the message says why.
final class RekeyBackup {
    let path: String
    /// The files this run writes: PATH, and PATH-keyslots with `--data-key`.
    private let files: [String]
    private let existedBefore: Bool
    /// A descriptor on each file of `files` as published, and its identity; empty until `written()`.
    private var published: [(fd: Int32, identity: Identity)] = []

    private struct Identity: Equatable {
        let device: UInt64
        let inode: UInt64
    }

    init(_ path: String, withSlots: Bool = false) {
        self.path = path
        let slots = KeySlots.slotFilePath(forDatabaseAt: path)
        files = withSlots ? [path, slots] : [path]
        existedBefore = Self.identity(path) != nil || Self.identity(slots) != nil
    }

    deinit {
        for file in published { close(file.fd) }
    }

    /// The backup is verified and in place: a descriptor on each of its files, to remove them only while they
    /// are still these files.
    func written() {
        for file in files {
            // O_NONBLOCK: a FIFO put there meanwhile does not hang the open; O_NOFOLLOW: no link is followed.
            let fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { break }
            var status = stat()
            guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
                close(fd)
                break
            }
            published.append((fd, Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))))
        }
        if published.count != files.count {
            for file in published { close(file.fd) }
            published = []
        }
    }

    /// Whether a failed rekey is to check the database for this backup: this run published it, over nothing.
    var removable: Bool { !published.isEmpty && !existedBefore }

    /// The rekey failed and what was found rules the removal out (`reason`): says so, and that it stays.
    func keep(because reason: String) {
        guard removable else { return }
        Output.message(
            "fmdb-cipher: note: kept the backup \(files.joined(separator: " and ")): \(reason); it may be the only "
                + "copy some of the old secrets open: keep it")
    }

    /// The rekey of `database` failed before it changed the key (or could not start): removes the backup when
    /// `oldKey` (a check on the database, made before this call) found that the old key opens every page and the
    /// files are still the ones this run published, and says on standard error what it did and why.
    func discardAfterFailedRekey(of database: String, oldKey: KeyCheck) {
        guard removable else { return }
        switch oldKey {
        case .opens: break
        case .doesNotOpen:
            Output.message(
                "fmdb-cipher: note: kept the backup \(path): the old key does not open every page of \(database) "
                    + "(fmdb-cipher check \(database) with each key tells whether either does); this backup may be "
                    + "your only copy: keep it")
            return
        case .couldNotCheck(let reason):
            Output.message(
                "fmdb-cipher: note: kept the backup \(path): whether the old key opens \(database) could not be "
                    + "checked (\(reason)); check it (fmdb-cipher check \(database)): once the old key opens it, "
                    + "remove the backup before retrying, or retry with --force")
            return
        }
        // Each file away from its name first, under a name no other run knows, and checked there.
        var moved: [(file: String, aside: String)] = []
        var problem: String?
        for (file, kept) in zip(files, published) {
            let aside = Self.privateName(beside: file)
            guard rename(file, aside) == 0 else {
                problem = "could not remove \(file) (\(String(cString: strerror(errno))))"
                break
            }
            moved.append((file, aside))
            guard Self.identity(aside) == kept.identity else {
                problem = "\(file) is no longer the file this run wrote (another run replaced it?)"
                break
            }
        }
        guard let problem else {
            for item in moved { unlink(item.aside) }
            Output.message(
                "fmdb-cipher: note: removed the backup \(files.joined(separator: " and ")): the rekey did not take "
                    + "and the database still opens with the old key (the retry writes a new backup)")
            return
        }
        var stranded: [String] = []
        for item in moved where fmdb_tool_rename_noreplace(item.aside, item.file) != 0 {
            stranded.append("\(item.aside) (meant for \(item.file))")
        }
        let alsoLeft = stranded.isEmpty ? "" : "; also left \(stranded.joined(separator: ", ")): a file took its name"
        Output.message(
            "fmdb-cipher: note: did not remove the backup \(path): \(problem)\(alsoLeft); remove it before "
                + "retrying, or retry with --force")
    }

    /// A name in the directory of `file` that no other process uses: dot, random.
    private static func privateName(beside file: String) -> String {
        let directory = (file as NSString).deletingLastPathComponent
        let random = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        return (directory.isEmpty ? "" : directory + "/") + ".fmdb-cipher-discard-\(random)"
    }

    private static func identity(_ path: String) -> Identity? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}
