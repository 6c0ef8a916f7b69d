import CToolSupport
import FMDB
import Foundation

/// What a path holds, read without a key: the library's `FMDatabase.inspectFile(atPath:)`.
typealias FileKind = FMDatabaseFileKind

extension FMDatabaseFileKind {
    init(path: String) {
        self = FMDatabase.inspectFile(atPath: path)
    }

    /// Whether the header says encrypted (or not a database at all): a plaintext header included.
    var isEncrypted: Bool {
        switch self {
        case .encrypted, .encryptedWithPlaintextHeader: return true
        default: return false
        }
    }

    /// The plaintext header's size, for a SQLCipher file that keeps one (never a plaintext database).
    var plaintextHeaderSize: Int? {
        if case .encryptedWithPlaintextHeader(let size) = self { return size }
        return nil
    }

    /// How every command names a file with a plaintext header.
    static func plaintextHeaderDescription(_ size: Int) -> String {
        "encrypted, with a plaintext header of \(size) bytes (as iOS apps in shared containers write)"
    }
}

enum DatabaseFiles {
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

/// encrypt, decrypt, export, migrate and the backups of rekey: the library's `FMDatabaseCopy` (verified, private,
/// atomic, carrying the slot file), with the tool's progress line, signal clean-up, messages and exit codes.
struct DatabaseCopy {
    let source: String
    let sourceProvider: (any KeyProvider)?
    let sourceSettings: CipherSettings
    let destination: String
    let destinationProvider: (any KeyProvider)?
    let settings: CipherSettings
    let force: Bool
    let quiet: Bool
    let verb: String
    /// The key slot file that goes with the copy (see `FMDatabaseCopy.SlotFile`).
    var slots: FMDatabaseCopy.SlotFile = .none
    /// `--progress`: machine-readable lines when standard error is not a terminal (`ProgressReporter`), the last
    /// at 100 once the copy is verified and in place.
    var progressLines = false

    /// Runs the copy; returns the recovery key (and its slot) of a new slot file made with one, to be shown once.
    @discardableResult
    func run() throws -> (key: RecoveryKey, slot: KeySlotInfo)? {
        var copy = FMDatabaseCopy(
            from: source, keyProvider: sourceProvider, settings: sourceSettings, to: destination,
            destinationKeyProvider: destinationProvider, destinationSettings: settings)
        copy.slotFile = slots
        copy.replacesExisting = force
        let report = try perform { onStage in
            copy.onStage = onStage
            return try copy.run()
        }
        guard let key = report?.recoveryKey, let slot = report?.recoveryKeySlot else { return nil }
        return (key, slot)
    }

    /// Runs `body` (a library copy given the tool's stage handler) with the tool's progress line, signal clean-up,
    /// messages and exit codes; nil when `body` returned nil (nothing to do).
    func perform(_ body: (@escaping (FMDatabaseCopy.Stage) -> Void) throws -> FMDatabaseCopy.Report?) throws
        -> FMDatabaseCopy.Report?
    {
        let stages = makeStages()
        let found: FMDatabaseCopy.Report?
        do {
            found = try body { stages.reached($0) }
        } catch {
            throw failed(error, stages)
        }
        guard let report = found else { return nil }
        finished(report, stages)
        return report
    }

    /// `rekey --backup`: the library's rekey after a backup (`FMDatabaseCopy.rekeyWithBackup`), from the old key
    /// (SRC's and DEST's) to `newProvider`. The backup has every copy's progress line, signal clean-up, messages
    /// and exit codes; a failure to open the database for the rekey is said as `DatabaseFiles.open` says it.
    /// `rekeyStarting` is called with the database's format right before the rekey; an error of the rekey itself
    /// is thrown as the library threw it, for the caller to say. `backupWritten` is called once the backup is
    /// verified and in place.
    func rekey(
        from oldProvider: any KeyProvider, to newProvider: any KeyProvider, busyTimeout: TimeInterval,
        backupWritten: @escaping () -> Void, rekeyStarting: @escaping (CipherFormat?) -> Void
    ) throws -> FMRekeyOutcome {
        let stages = makeStages()
        // The step under way, told by the library's hooks: an error is said as that step's.
        var step = RekeyStep.backup
        do {
            return try FMDatabaseCopy.rekeyWithBackup(
                source, keyProvider: oldProvider, settings: sourceSettings, to: newProvider, backup: destination,
                replacingExisting: force, busyTimeout: busyTimeout, onStage: { stages.reached($0) },
                onBackup: { report in
                    step = .opening
                    backupWritten()
                    finished(report, stages)
                    if !quiet { Output.message("backup written to \(destination)") }
                },
                onRekey: { format in
                    step = .rekey
                    rekeyStarting(format)
                })
        } catch {
            switch step {
            case .backup: throw failed(error, stages)
            case .opening: throw DatabaseFiles.openingError(error, path: source, settings: sourceSettings)
            case .rekey: throw error
            }
        }
    }

    private enum RekeyStep { case backup, opening, rekey }

    private func makeStages() -> CopyStages {
        CopyStages(progress: ProgressReporter(quiet: quiet, lines: progressLines), verb: verb, source: source)
    }

    /// The copy failed: its progress line ends, and its error is said in the tool's terms.
    private func failed(_ error: Error, _ stages: CopyStages) -> CLIError {
        stages.failed()
        return cliError(error, at: stages.stage)
    }

    /// The copy is verified and in place: its last progress line, and what it did, on standard error.
    private func finished(_ report: FMDatabaseCopy.Report, _ stages: CopyStages) {
        stages.completed()
        if let left = report.stagingDirectoryNotRemoved {
            Output.message("fmdb-cipher: warning: \(left.message)")
        }
        if report.removedDestinationSlotFile {
            Output.message(
                "fmdb-cipher: note: removed \(KeySlots.slotFilePath(forDatabaseAt: destination)), the key slot file of "
                    + "the DEST that was replaced: it does not open the new \(destination), which has no key slots")
        }
        if !quiet {
            // Throughput on standard error, so scripts that read standard output see nothing new.
            let total = max(Double(report.sourceBytes), 1)
            let copySeconds = seconds(report.copyDuration)
            Output.message(
                String(
                    format: "%@: %.1f MB in %.2f s (%.1f MB/s); source check %.2f s; verification %.2f s",
                    verb, total / 1e6, copySeconds, total / 1e6 / max(copySeconds, 1e-9),
                    seconds(report.sourceCheckDuration), seconds(report.verificationDuration)))
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The tool's message and exit code for a failed copy, by the stage it failed in.
    private func cliError(_ error: Error, at stage: FMDatabaseCopy.Stage?) -> CLIError {
        let failure = (error as? FMDatabaseError)?.copyFailure
        switch failure {
        case .sourceDamaged?, .verificationFailed?:
            return CLIError((error as NSError).localizedDescription, code: Exit.integrity)
        case .sourceInUse?:
            // The library says why SRC is not replaced; the tool adds its own commands for what to do, by the
            // failure's kind (never by rewording the library's text).
            var message = (error as NSError).localizedDescription
            if verb == "migrate", source == destination {
                message +=
                    " (with fmdb-cipher: `fmdb-cipher sql \(source) 'PRAGMA wal_checkpoint(TRUNCATE)'` with its key "
                    + "checkpoints a -wal left behind; `fmdb-cipher migrate \(source) DEST` migrates into a new file "
                    + "instead)"
            }
            return CLIError(message, code: Exit.busy)
        default: break
        }
        switch stage {
        case .writingSlotFile?:
            return CLIError.from(error, context: "\(verb) \(source) → \(destination): the key slot file")
        case .openingSource?:
            return DatabaseFiles.openingError(error, path: source, settings: sourceSettings)
        case .checkingSource?:
            return CLIError.fromOpened(error, context: source, keyed: sourceProvider != nil)
        case .copying?:
            return CLIError.fromOpened(
                error, context: "\(verb) \(source) → \(destination)", keyed: sourceProvider != nil)
        case .verifying?:
            return CLIError.fromOpened(error, context: "verifying the new database", keyed: destinationProvider != nil)
        default:
            // Checking DEST, making the private directory, publishing: the library's own words, with the
            // tool's way to ask for a replacement in place of the library's (its documented hint).
            let message = (error as NSError).localizedDescription
                .replacingOccurrences(of: FMDatabaseCopy.replaceHint, with: "use --force")
            let code: Int32
            switch failure {
            case .sameFile?: code = Exit.usage
            case .destinationExists?, .cannotCreate?: code = Exit.cannotCreate
            case .destinationInUse?: code = Exit.busy
            default: code = CLIError.from(error, context: destination).code
            }
            return CLIError(message, code: code)
        }
    }
}

/// The signal side of a library copy or private file: its private directory is registered for removal on
/// SIGINT, SIGTERM and SIGHUP from when it is made (signals blocked in between) until the library releases it.
final class StagingCleanup {
    private var cleanupSlot: Int32 = -1
    private var savedMask = sigset_t()
    private var blocked = false

    func reached(_ stage: FMDatabaseCopy.Stage) {
        switch stage {
        case .removedInterruptedCopy(let directory):
            Output.message("fmdb-cipher: note: removed \(directory), the unfinished copy of a run that was killed")
        case .creatingStagingDirectory:
            var signals = Self.fatalSignals()
            blocked = pthread_sigmask(SIG_BLOCK, &signals, &savedMask) == 0
        case .stagingDirectory(let directory):
            if let directory { cleanupSlot = fmdb_tool_cleanup_register(directory) }
            if blocked { pthread_sigmask(SIG_SETMASK, &savedMask, nil) }
            blocked = false
        case .stagingDirectoryReleased:
            // The point of no return: from here DEST is being put in place or is. SIGINT, SIGTERM and SIGHUP stay
            // blocked for the rest of the run, so the exit status says what was done (a signal now would exit
            // 128+n over a finished file; a pending one is dropped when the process exits).
            var signals = Self.fatalSignals()
            pthread_sigmask(SIG_BLOCK, &signals, nil)
            fmdb_tool_cleanup_unregister(cleanupSlot)
            cleanupSlot = -1
        default: break
        }
    }

    /// The signals whose handler removes the private directory: SIGINT, SIGTERM and SIGHUP.
    private static func fatalSignals() -> sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
        return signals
    }
}

/// What a running copy has reached, for its progress line, its error messages and the signal handler
/// (`StagingCleanup`).
private final class CopyStages {
    private let progress: ProgressReporter
    private let verb: String
    private let total: Double
    private let cleanup = StagingCleanup()
    private(set) var stage: FMDatabaseCopy.Stage?
    private var copying = false

    init(progress: ProgressReporter, verb: String, source: String) {
        self.progress = progress
        self.verb = verb
        total = max(Double(fileSize(source)), 1)
    }

    func reached(_ stage: FMDatabaseCopy.Stage) {
        cleanup.reached(stage)
        switch stage {
        case .removedInterruptedCopy, .stagingDirectoryReleased: return
        case .copying(let file):
            copying = true
            let total = total
            progress.start(verb, totalBytes: total) { Double(fileSize(file)) / total }
        case .verifying:
            copying = false
            progress.finish("\(verb): verifying")
        default: break
        }
        self.stage = stage
    }

    /// The copy is verified and in place: its line at 100 (`--progress`).
    func completed() { progress.complete() }

    func failed() {
        if copying { progress.finish("\(verb): failed") }
        copying = false
    }
}
