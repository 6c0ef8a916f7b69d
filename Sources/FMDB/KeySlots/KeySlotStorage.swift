import Foundation

/// The slot file on disk: read without following a symbolic link, written atomically and privately,
/// and a lock that serializes the read-modify-write of slot changes between processes.
///
/// A write is: a new temporary file beside the target (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600),
/// the bytes, `fsync`, `rename` over the target, `fsync` of the directory. A SIGKILL or power loss at
/// any moment leaves the old file or the new one at the target path, never neither and never a mix.
///
/// Whether a write took is asked of the file system, never inferred from which call failed: once the
/// new file is at the path (the rename or link returned, or reported an error yet the path holds the new
/// bytes), the write took, and a failed `fsync` of the directory only means it may not survive a power
/// loss (`Durability.notSynced`): the caller decides what that means for its change, and says so.
enum KeySlotStorage {
    /// What a write that took left on disk.
    enum Durability {
        /// In place and synced: it survives a power loss.
        case synced
        /// In place (every reader sees it), but the directory could not be synced: after a power loss the
        /// path may hold the old file (or, for a new file, nothing) again.
        case notSynced(FMDatabaseError)

        /// For writers whose caller syncs, or cleans up, themselves: a failed directory sync is their error.
        func requireSynced() throws {
            if case .notSynced(let error) = self { throw error }
        }
    }

    static let temporaryMarker = ".tmp-"

    /// The slot file's bytes.
    /// - Throws: SQLITE_CANTOPEN when it is missing or unreadable (or a symbolic link),
    ///   SQLITE_CORRUPT when it is larger than a slot file can be.
    static func read(_ path: String) throws -> Data {
        // O_NONBLOCK: a FIFO there is opened at once and refused by the type check below, never waited on.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            let reason = errno == ENOENT ? "it is missing" : String(cString: strerror(errno))
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "Cannot read the key slot file \(path): \(reason).")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "The key slot file \(path) is not a regular file.")
        }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FMDatabaseError(
                    code: SQLITE_IOERR,
                    message: "Cannot read the key slot file \(path): \(String(cString: strerror(errno))).")
            }
            if n == 0 { break }
            data.append(contentsOf: chunk[0..<n])
            if data.count > KeySlotFile.maximumSize {
                throw KeySlotFile.corrupt("it is larger than \(KeySlotFile.maximumSize) bytes")
            }
        }
        return data
    }

    /// Replaces (or creates) the file at `path` with `data`, atomically, mode 0600. With `replacing: false`
    /// the file only appears if nothing is at `path` (link(2) of the synced temporary file, which fails on
    /// anything there, a dangling symbolic link included, and never follows one).
    /// - Returns: `.synced`, or `.notSynced` when the new file is at `path` but the directory could not be
    ///   synced (the write took; it may not survive a power loss).
    /// - Throws: SQLITE_CANTOPEN (the temporary file cannot be made; something is at `path` and `replacing`
    ///   is false) / SQLITE_IOERR / SQLITE_FULL / SQLITE_READONLY when the new file is not at `path`: the old
    ///   file is then untouched.
    @discardableResult
    static func writeAtomically(_ data: Data, to path: String, replacing: Bool = true) throws -> Durability {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        // The writer's process id is in the name: `removeStaleTemporaries` leaves a live writer's file alone.
        let temporary =
            directory + "/." + url.lastPathComponent + temporaryMarker + "\(getpid())-"
            + String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ioError("create a temporary file in \(directory)", code: SQLITE_CANTOPEN) }
        var closed = false
        defer {
            if !closed { close(fd) }
        }
        do {
            // The umask may have narrowed 0600 further; it can never widen it. Make it exactly 0600.
            guard fchmod(fd, 0o600) == 0 else { throw ioError("set the mode of \(temporary)") }
            try data.withUnsafeBytes { buffer in
                var written = 0
                while written < buffer.count {
                    let n = write(fd, buffer.baseAddress?.advanced(by: written), buffer.count - written)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw ioError("write \(temporary)")
                    }
                    written += n
                }
            }
            guard fsync(fd) == 0 else { throw ioError("sync \(temporary)") }
            closed = true
            guard close(fd) == 0 else { throw ioError("close \(temporary)") }
            if replacing {
                // An error from rename(2) does not prove the rename did not happen: the path is asked.
                if rename(temporary, path) != 0 {
                    let error = ioError("replace \(path)")
                    guard holds(path, data) else { throw error }
                    // The path holds the new bytes, but the temporary name may still be there too.
                    removeTemporary(temporary)
                }
            } else {
                if link(temporary, path) != 0 {
                    if errno == EEXIST {
                        throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path) already exists.")
                    }
                    let error = ioError("create \(path)")
                    guard holds(path, data) else { throw error }
                }
                removeTemporary(temporary)
            }
        } catch {
            removeTemporary(temporary)
            throw error
        }
        // The new file is at the path: the write took, whatever the directory sync says.
        if let failure = syncDirectory(directory) { return .notSynced(failure) }
        return .synced
    }

    /// Removes a temporary file this write made, trying once more after a failure (an I/O error): one left
    /// behind is removed by the next slot change (`removeStaleTemporaries`), but none should be.
    private static func removeTemporary(_ temporary: String) {
        if unlink(temporary) != 0, errno != ENOENT { unlink(temporary) }
    }

    /// Whether the file at `path` (not followed if a link) holds exactly `data`.
    static func holds(_ path: String, _ data: Data) -> Bool {
        (try? read(path)) == data
    }

    /// `fsync` of `directory`: nil when it synced, else the error.
    static func syncDirectory(_ directory: String) -> FMDatabaseError? {
        let failure = FileSystem.syncDirectory(directory)
        guard failure != 0 else { return nil }
        errno = failure
        return ioError("sync the directory \(directory)")
    }

    /// Removes temporary files a killed writer left beside `path` (they hold only wrapped keys):
    /// `.NAME.tmp-PID-X` whose process is gone, and the names without a process id that earlier versions made.
    /// Called with the slot file's lock held (every write of the slot file takes it; a copy's `copySlotFile`,
    /// which does not, is a live process and is left alone). unlink(2) removes the name, never what a link there
    /// points to.
    static func removeStaleTemporaries(of path: String) {
        let url = URL(fileURLWithPath: path)
        let prefix = "." + url.lastPathComponent + temporaryMarker
        let directory = url.deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            let rest = name.dropFirst(prefix.count)
            if let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]), pid > 0, pid != getpid(),
                kill(pid, 0) == 0 || errno == EPERM
            {
                continue
            }
            unlink(directory + "/" + name)
        }
    }

    /// Runs `body` holding an exclusive `flock` on `<slot file>.lock` (created 0600 if needed): slot
    /// changes by several processes happen one after another, never interleaved.
    static func withExclusiveLock<T>(forSlotFile path: String, _ body: () throws -> T) throws -> T {
        let lockPath = path + ".lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ioError("open the lock file \(lockPath)", code: SQLITE_CANTOPEN) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw ioError("lock \(lockPath)", code: SQLITE_BUSY) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    static func ioError(_ what: String, code: Int32 = SQLITE_IOERR) -> FMDatabaseError {
        let number = errno
        // A slot file that may not be written (EACCES) is read-only to this process, as a read-only mount is.
        let resolved = number == EACCES ? SQLITE_READONLY : FileSystem.resultCode(forSystemError: number) ?? code
        return FMDatabaseError(code: resolved, message: "Cannot \(what): \(String(cString: strerror(number))).")
    }
}
