import FMDB
import Foundation

/// What a path holds, read without a key: the library's `FMDatabase.inspectFile(atPath:)`.
typealias FileKind = FMDatabaseFileKind

extension FMDatabaseFileKind {
    init(path: String) {
        self = FMDatabase.inspectFile(atPath: path)
    }

    /// Whether the header says encrypted (or not a database at all).
    var isEncrypted: Bool {
        if case .encrypted = self { return true }
        return false
    }
}

enum DatabaseFiles {
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
    /// open leaves no -wal or -shm it did not find: see `mayOpenWithoutWriting`; then `PRAGMA query_only`
    /// refuses every write (SQLITE_READONLY, as a read-only connection does).
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
                throw CLIError.from(error, context: path)
            }
        }
        if queryOnly {
            do {
                try db.executeUpdate("PRAGMA query_only = ON", values: nil)
            } catch {
                db.close()
                throw CLIError.from(error, context: path)
            }
        }
        return db
    }

    /// Every user table and its row count (quoted identifiers, so any table name works).
    static func tableCounts(_ db: FMDatabase) throws -> [(String, Int64)] {
        var names: [String] = []
        let rs = try db.executeQuery(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
            values: nil)
        while try rs.nextWithError() { if let name = rs.string(forColumnIndex: 0) { names.append(name) } }
        return try names.map { name in
            let quoted = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let count = try db.executeQuery("SELECT count(*) FROM \(quoted)", values: nil)
            // nextWithError, not next(): a damaged page must fail the count, not read as 0 rows.
            return (name, try count.nextWithError() ? count.longLongInt(forColumnIndex: 0) : 0)
        }
    }

    static func integrityCheck(_ db: FMDatabase, quick: Bool = false) throws -> [String] {
        var problems: [String] = []
        let rs = try db.executeQuery(quick ? "PRAGMA quick_check" : "PRAGMA integrity_check", values: nil)
        while try rs.nextWithError() {
            // SQLite may put several problems in one row, a line each.
            let row = rs.string(forColumnIndex: 0) ?? ""
            if row != "ok" { problems += row.split(separator: "\n").map(String.init) }
        }
        return problems
    }

    /// SQLCipher 4's PRAGMA cipher_integrity_check on a keyed connection: one line per page whose HMAC fails
    /// ("HMAC verification failed for page N"), none when every page passes. Only where the linked SQLCipher
    /// has the pragma (`CipherFormat.v4.isSupportedByLinkedSQLCipher`); SQLCipher 3.4.1 answers no rows.
    static func cipherIntegrityCheck(_ db: FMDatabase) throws -> [String] {
        var problems: [String] = []
        let rs = try db.executeQuery("PRAGMA cipher_integrity_check", values: nil)
        while try rs.nextWithError() {
            let row = rs.string(forColumnIndex: 0) ?? ""
            if row != "ok" { problems += row.split(separator: "\n").map(String.init) }
        }
        return problems
    }
}

/// Where the key slot file of a copy comes from (see `DatabaseCopy.slots`).
enum SlotFileOrigin {
    /// SRC's slot file, byte for byte: the copy keeps SRC's data key and salt (export, migrate, a backup).
    case source
    /// A new slot file: a random data key, a slot for the secret, and a recovery-key slot if asked (encrypt).
    case new(KeySlotSecret, KeySlotKDF, recoveryKey: Bool)
}

/// encrypt, decrypt and export: SRC → a new file in a private directory beside DEST (PrivateOutput) → verified →
/// renamed into place.
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
    /// A slotted copy: its slot file is written beside the new file first, so that `destinationProvider` (a
    /// `KeySlotKeyProvider`) creates it under that slot file's identity and the verification unlocks the
    /// slot file against the new file's bytes.
    var slots: SlotFileOrigin?
    /// Whether the slot file goes to DEST-keyslots (not for an in-place migrate, where SRC's stays).
    var placesSlotFile = true

    /// Runs the copy; returns the recovery key (and its slot) of a new slot file made with one, to be shown once.
    @discardableResult
    func run() throws -> (key: RecoveryKey, slot: KeySlotInfo)? {
        let output = try PrivateOutput(
            destination: destination, force: force, source: source,
            carriesSlotFile: slots != nil && placesSlotFile)
        let temporary = output.file
        let progress = ProgressReporter(quiet: quiet)
        var recoveryKey: (key: RecoveryKey, slot: KeySlotInfo)?
        do {
            switch slots {
            case .source?: try KeySlots.copySlotFile(from: source, to: temporary)
            case .new(let secret, let kdf, let recovery)?:
                let made = try KeySlots.createSlotFile(
                    forNewDatabaseAt: temporary, secret: secret, kdf: kdf, addingRecoveryKey: recovery)
                if let key = made.recoveryKey, let slot = made.slots.first(where: { $0.kind == .recoveryKey }) {
                    recoveryKey = (key, slot)
                }
            case nil: break
            }
        } catch {
            throw CLIError.from(error, context: "\(verb) \(source) → \(destination): the key slot file")
        }
        // Only the new file this run made, beside the slot file it just wrote, is created under that slot file's
        // identity: a KeySlotKeyProvider adopts no other slot file for a missing or empty database.
        let newFileProvider =
            slots == nil
            ? destinationProvider
            : (destinationProvider as? KeySlotKeyProvider).map { $0.creatingDatabase(at: temporary) }
                ?? destinationProvider

        let db = try DatabaseFiles.open(
            source, provider: sourceProvider, settings: sourceSettings, canAttachNewFiles: true)
        defer { db.close() }
        let clock = ContinuousClock()
        let sourceCheckStarted = clock.now
        // A damaged SRC is refused rather than copied: sqlcipher_export would silently lose what it cannot read.
        let expected: [(String, Int64)]
        do {
            let problems = try DatabaseFiles.integrityCheck(db, quick: true)
            guard problems.isEmpty else {
                throw CLIError(
                    "\(source) fails its integrity check, so it is not copied: \(problems.prefix(3).joined(separator: "; "))",
                    code: Exit.integrity)
            }
            expected = try DatabaseFiles.tableCounts(db)
        } catch {
            throw CLIError.fromOpened(error, context: source, keyed: sourceProvider != nil)
        }
        let total = max(Double(fileSize(source)), 1)
        let copyStarted = clock.now
        progress.start(verb) { Double(fileSize(temporary)) / total }
        do {
            try db.attachDatabase(
                atPath: temporary, schema: "fmdb_cipher_dest", keyProvider: newFileProvider, settings: settings)
            try db.exportContents(to: "fmdb_cipher_dest")
            try db.detachDatabase(schema: "fmdb_cipher_dest")
        } catch {
            progress.finish("\(verb): failed")
            throw CLIError.fromOpened(
                error, context: "\(verb) \(source) → \(destination)", keyed: sourceProvider != nil)
        }
        progress.finish("\(verb): verifying")
        let verifyStarted = clock.now
        try verify(temporary, provider: newFileProvider, expected: expected)
        try output.commit()
        if !quiet {
            // Throughput on standard error, so scripts that read standard output see nothing new.
            let copy = seconds(copyStarted.duration(to: verifyStarted))
            let sourceCheck = seconds(sourceCheckStarted.duration(to: copyStarted))
            let check = seconds(verifyStarted.duration(to: clock.now))
            Output.message(
                String(
                    format: "%@: %.1f MB in %.2f s (%.1f MB/s); source check %.2f s; verification %.2f s",
                    verb, total / 1e6, copy, total / 1e6 / max(copy, 1e-9), sourceCheck, check))
        }
        return recoveryKey
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Opens the new file with its own key and checks integrity and every table's row count.
    private func verify(_ path: String, provider: (any KeyProvider)?, expected: [(String, Int64)]) throws {
        let copy = try DatabaseFiles.open(path, provider: provider, settings: settings, readOnly: true)
        defer { copy.close() }
        do {
            let problems = try DatabaseFiles.integrityCheck(copy)
            guard problems.isEmpty else {
                throw CLIError(
                    "the new database failed its integrity check: \(problems.prefix(3).joined(separator: "; "))",
                    code: Exit.integrity)
            }
            let actual = try DatabaseFiles.tableCounts(copy)
            guard actual.map(\.0) == expected.map(\.0), actual.map(\.1) == expected.map(\.1) else {
                throw CLIError(
                    "the new database does not hold the same tables and rows as \(source)", code: Exit.integrity)
            }
        } catch {
            throw CLIError.fromOpened(error, context: "verifying the new database", keyed: provider != nil)
        }
    }
}
