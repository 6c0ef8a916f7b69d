import CToolSupport
import FMDB
import Foundation

/// The tool's operations on database files outside a copy: checking an input, opening one as every command
/// does (its errors in the tool's words), its checks, its size, and syncing its directory.
enum DatabaseFiles {
    /// The size of a file, or 0.
    static func fileSize(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// fsync(2) of the directory holding `database`, once a change to it is done: SQLite's commit removes the
    /// rollback journal (or, at the last close, the WAL) without syncing the directory, and ignores a failed
    /// sync of the directory when it creates the journal, so without this a power loss soon after could bring
    /// the journal back and roll the change back. nil when it synced, else why not (a warning says so: the
    /// change is done, its exit code stands, but it may not survive a power loss yet).
    static func syncDirectory(of database: String) -> String? {
        let directory = URL(fileURLWithPath: database).deletingLastPathComponent().path
        let fd = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        while fsync(fd) != 0 {
            guard errno == EINTR else { return String(cString: strerror(errno)) }
        }
        return nil
    }

    /// Checks that `path` is a readable file; exit 66 otherwise.
    static func requireInput(_ path: String) throws -> FileKind {
        try InputFiles.requireRegularFile(path)
        let kind = FileKind(path: path)
        switch kind {
        case .missing: throw CLIError("\(path): no such file", code: Exit.noInput)
        case .directory: throw CLIError("\(path): is a directory, not a database file", code: Exit.noInput)
        case .notRegularFile:
            throw CLIError("\(path): is not a regular file (a FIFO, device or socket)", code: Exit.noInput)
        case .unreadable: throw CLIError("\(path): not readable (permission denied)", code: Exit.noInput)
        default: return kind
        }
    }

    /// Keeps the library's own log lines (an error, a pending WAL checkpoint after a rekey) off the
    /// tool's standard error: the tool reports every outcome itself, once, in its own words.
    static func quiet(_ db: FMDatabase) {
        db.logsErrors = false
        db.logger.logLevel = .critical
    }

    /// Whether a read-only open of `path` may use a read-write connection that writes nothing: when no
    /// side file (-wal, -shm, -journal) is there. A read-only connection to a WAL database creates -wal and
    /// -shm and, unable to checkpoint, leaves them behind; a read-write connection that is the last to close
    /// removes them again. With a side file there (another process, or a crash to recover), the connection
    /// stays truly read-only: it then finds what it leaves.
    static func mayOpenWithoutWriting(_ path: String) -> Bool {
        ["-wal", "-shm", "-journal"].allSatisfy { suffix in
            var status = stat()
            return lstat(path + suffix, &status) != 0 && errno == ENOENT
        }
    }

    /// Opens a database, keyed with `provider` when given (verified: a wrong key throws code 26). A read-only
    /// open leaves no -wal or -shm it did not find (see `mayOpenWithoutWriting`), and its SQL may only read
    /// (`FMDatabase.makeQueryOnly()`: a write or a PRAGMA that changes anything is SQLITE_AUTH).
    static func open(
        _ path: String,
        provider: (any KeyProvider)?,
        settings: CipherSettings = CipherSettings(),
        readOnly: Bool = false,
        canAttachNewFiles: Bool = false
    ) throws -> FMDatabase {
        let db = FMDatabase(path: path)
        quiet(db)
        // Attached databases inherit the main connection's flags: creating DEST needs SQLITE_OPEN_CREATE
        // (harmless for SRC, which exists).
        let queryOnly = readOnly && mayOpenWithoutWriting(path)
        let flags =
            readOnly && !queryOnly
            ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (canAttachNewFiles ? SQLITE_OPEN_CREATE : 0)
        guard db.open(withFlags: flags) else { throw CLIError.from(db.lastError(), context: path) }
        if let provider {
            do {
                try db.setKey(using: provider, settings: settings)
            } catch {
                db.close()
                let failure = openingError(error, path: path, settings: settings)
                if failure.code == Exit.wrongKey, FileKind(path: path) == .plaintext {
                    throw plaintextGivenAKey(path)
                }
                throw failure
            }
        }
        if readOnly {
            do {
                // Query only, beside the open flags: SQL may not write, nor rewrite the file through a PRAGMA
                // (`journal_mode = WAL`), nor undo this.
                try db.makeQueryOnly()
            } catch {
                db.close()
                throw CLIError.from(error, context: path)
            }
        }
        return db
    }

    /// A key given for a plaintext database: no key opens it (exit 65), and what to do instead.
    static func plaintextGivenAKey(_ path: String) -> CLIError {
        CLIError(
            "\(path): is a plaintext SQLite database (not encrypted), so no key opens it: give no key to read it, "
                + "or make an encrypted copy with `fmdb-cipher encrypt \(path) NEW.db`",
            code: Exit.wrongKey, hintsKey: false)
    }

    /// The error of a key that failed to open `path` with `settings`. A file with a plaintext header opens only
    /// with its header size and salt, which it does not record: when they were not given, a wrong key says so.
    static func openingError(_ error: Error, path: String, settings: CipherSettings) -> CLIError {
        let failure = CLIError.from(error, context: path)
        guard failure.code == Exit.wrongKey, settings.plaintextHeaderSize == nil,
            let size = FileKind(path: path).plaintextHeaderSize
        else { return failure }
        return CLIError(
            failure.message + "; \(path) is " + FileKind.plaintextHeaderDescription(size)
                + ": give --cipher-plaintext-header-size \(size) and --cipher-salt (the salt the app keeps)",
            code: failure.code)
    }

    /// Every user table and its row count (the library's `tableRowCounts`).
    static func tableCounts(_ db: FMDatabase) throws -> [(String, Int64)] {
        try db.tableRowCounts().map { ($0.name, $0.rows) }
    }

    /// PRAGMA integrity_check (quick_check with `quick`): the library's `integrityProblems`.
    static func integrityCheck(_ db: FMDatabase, quick: Bool = false) throws -> [String] {
        try db.integrityProblems(quick: quick)
    }

    /// SQLCipher 4's PRAGMA cipher_integrity_check on a keyed connection, or nil when SQLCipher declines to
    /// check the format (no per-page HMAC): the library's `cipherIntegrityProblemsIfChecked`.
    static func cipherIntegrityCheck(_ db: FMDatabase) throws -> [String]? {
        try db.cipherIntegrityProblemsIfChecked()
    }

    /// Creates an empty file at `path` for a new database (`sql` on a missing file): mode 0600 whatever the
    /// umask, O_EXCL|O_NOFOLLOW so a file or link that is already there (a dangling symlink included) is
    /// refused with exit 73, never followed or replaced. SQLite gives the journal the same mode.
    static func createEmptyDatabase(at path: String) throws {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let reason =
                errno == EEXIST
                ? "something is already there (a symbolic link?)"
                : String(cString: strerror(errno))
            throw CLIError("cannot create the database \(path): \(reason)", code: Exit.cannotCreate)
        }
        fchmod(fd, 0o600)
        close(fd)
    }
}
