import CSQLCipher
import Foundation

/// A verified, private, atomic copy of a database into a new file: encrypt a plaintext database, decrypt an
/// encrypted one, export one under another key, settings or format, migrate a SQLCipher 3 file to 4, or
/// write a backup before a rekey. A slotted database's key slot file goes with it.
///
/// ```swift
/// // A plaintext database into a new encrypted file.
/// try FMDatabaseCopy.encrypt("plain.db", to: "app.db", keyProvider: PassphraseKeyProvider("secret"))
///
/// // An encrypted database under a new key and page size; any option on the value before `run()`.
/// var copy = FMDatabaseCopy(
///     from: "app.db", keyProvider: PassphraseKeyProvider("secret"),
///     to: "copy.db", destinationKeyProvider: PassphraseKeyProvider("other"),
///     destinationSettings: CipherSettings(pageSize: 8192))
/// copy.replacesExisting = true
/// let report = try copy.run()
/// print(report.sourceBytes)
/// ```
///
/// What every copy guarantees:
/// - **Verified.** SRC must pass `PRAGMA quick_check` (a damaged SRC is refused rather than copied:
///   `sqlcipher_export` would silently lose what it cannot read). The copy is then opened read-only with the
///   key and settings it should have, and must pass `PRAGMA integrity_check` and hold the same tables with the
///   same row counts, or nothing is published (``Failure/sourceDamaged``, ``Failure/verificationFailed``).
/// - **Private.** It is written in a private directory made beside DEST with mkdtemp(3) (0700), as a file
///   created with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600 whatever the umask (SQLite's journal beside it gets
///   the same mode); nobody else can plant a link there. DEST ends up 0600, or SRC's mode where that is
///   stricter. Anything at DEST — a file, a FIFO, a symbolic link, even a dangling one — is refused unless
///   ``replacesExisting`` (then it is replaced by a rename, never followed), and so is anything at
///   `DEST-keyslots`; a `DEST-wal` or `DEST-journal` that SQLite would replay into the new file is always refused.
/// - **Atomic.** The verified file is renamed into place (without replacing anything that appeared meanwhile,
///   unless ``replacesExisting``) and DEST's directory is synced: DEST is the old file or the new one at every
///   instant, and the call returns only once the rename is on disk. On any failure the private directory is
///   removed: nothing readable is left behind. A killed process can leave only that directory
///   (`.DEST.fmdb-cipher-PID-XXXXXX`, 0700): the next copy to DEST removes it once its process is gone.
///   ``onStage`` tells a program that removes partial output on a signal which directory that is.
/// - **Slot files carried.** With ``slotFile`` `.source` the copy keeps SRC's data key and salt and SRC's slot
///   file, byte for byte, becomes `DEST-keyslots`; with `.new` a new slot file is made for the new database.
///   The copy is verified through that slot file, which is put in place before DEST (holding the slot file
///   lock every slot change takes); when replacing a slotted DEST the old pair stays whole in the private
///   directory until the new one is in place, and is put back on a failure.
///
/// Errors are ``FMDatabaseError``s: SQLite's or the file system's code for what they reported (a wrong key is
/// `SQLITE_NOTADB`, a full disk `SQLITE_FULL`), and ``FMDatabaseError/copyFailure`` for what the copy itself
/// decided.
///
/// The value is not `Sendable` (``onStage`` is called on the calling thread): make and run it on one thread.
///
/// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#sqlcipher_export>
/// - Note: FMDB compatibility: FMDB has no such type; this is an addition.
public struct FMDatabaseCopy {
    /// Why a copy refused or failed, when the copy itself decided it (``FMDatabaseError/copyFailure``).
    public enum Failure: String, Sendable, Equatable {
        /// DEST is SRC (the same path, or the same file by another name). Code `SQLITE_MISUSE`.
        case sameFile
        /// Something is at DEST or `DEST-keyslots` and ``FMDatabaseCopy/replacesExisting`` is false, or appeared
        /// there while the copy was written. Code `SQLITE_CANTOPEN`.
        case destinationExists
        /// DEST cannot be made: a directory is there, its directory is missing, the private directory or file
        /// cannot be created, a side file (`DEST-wal`, `DEST-journal`) without DEST that SQLite would replay.
        /// Code `SQLITE_CANTOPEN`.
        case cannotCreate
        /// DEST has a `-wal` or hot `-journal`: it is in use, or was not closed cleanly, and SQLite would apply
        /// that file to the new database. Refused even when replacing. Code `SQLITE_BUSY`.
        case destinationInUse
        /// SRC fails its integrity check: it is not copied. Code `SQLITE_CORRUPT`.
        case sourceDamaged
        /// The new file does not pass its integrity check, or does not hold SRC's tables and row counts.
        /// Nothing was published. Code `SQLITE_CORRUPT`.
        case verificationFailed
        /// A migration in place did not replace SRC because another process has it open (or whether one has
        /// could not be checked), SRC could not leave WAL mode, a stopped process left a `-wal` with content, or
        /// its key slots changed during the copy. SRC is as it was; try again (or migrate into a new file).
        /// Code `SQLITE_BUSY`.
        case sourceInUse

        /// The `userInfo` key under which an ``FMDatabaseError`` records it.
        static let userInfoKey = "copyFailure"
    }

    /// The key slot file that goes with the copy.
    public enum SlotFile: Sendable {
        /// No slot file: DEST is keyed by ``FMDatabaseCopy/destinationKeyProvider`` alone (or is plaintext).
        case none
        /// SRC's slot file, byte for byte, as `DEST-keyslots`: the copy keeps SRC's data key and salt, so every
        /// slot of SRC opens it. Open SRC and DEST with the same ``KeySlotKeyProvider``.
        case source
        /// A new slot file for DEST: a random data key, a slot for the secret (a passphrase slot with `kdf`, or a
        /// raw-key slot), and a recovery-key slot when asked (``Report/recoveryKey``, to be shown once). DEST's key
        /// provider is a ``KeySlotKeyProvider`` for the same secret.
        case new(KeySlotSecret, kdf: KeySlotKDF = .default, addingRecoveryKey: Bool = false)
    }

    /// Where a running copy is, told to ``FMDatabaseCopy/onStage`` in this order (those that do not apply are
    /// skipped).
    public enum Stage: Sendable, Equatable {
        /// A private directory that a killed copy to the same DEST left behind was removed.
        case removedInterruptedCopy(directory: String)
        /// The private directory is about to be made. A program that removes partial output on a signal may
        /// block its signals here until ``stagingDirectory(_:)``, so that no signal finds it made but not noted.
        case creatingStagingDirectory
        /// The private directory (nil: it could not be made). Until ``stagingDirectoryReleased(_:)`` it holds
        /// nothing but this copy's partial output: a signal handler may remove it and everything in it.
        case stagingDirectory(String?)
        /// The new slot file is being written beside the new file.
        case writingSlotFile
        /// SRC is being opened (and keyed).
        case openingSource
        /// SRC's integrity and row counts are being read.
        case checkingSource
        /// The contents are being copied into `file` (inside the private directory; its size tells progress).
        case copying(file: String)
        /// The new file is being opened with its own key and checked.
        case verifying
        /// The verified copy (and its slot file) is being moved into place.
        case publishing
        /// From here the private directory may hold the replaced DEST (or is gone): a signal handler must no
        /// longer remove it.
        case stagingDirectoryReleased(String)
    }

    /// What a finished copy did.
    public struct Report: Sendable {
        /// The recovery key of a new slot file made with one (``SlotFile/new(_:kdf:addingRecoveryKey:)``): show
        /// it once; it is not stored anywhere in clear.
        public var recoveryKey: RecoveryKey?
        /// The slot that recovery key opens.
        public var recoveryKeySlot: KeySlotInfo?
        /// True when a copy without slots replaced a slotted DEST and removed its `DEST-keyslots`, which would
        /// not open the new file.
        public var removedDestinationSlotFile = false
        /// SRC's size in bytes.
        public var sourceBytes: Int64 = 0
        /// Time spent checking SRC (quick_check and row counts).
        public var sourceCheckDuration: Duration = .zero
        /// Time spent copying the contents.
        public var copyDuration: Duration = .zero
        /// Time spent verifying the copy.
        public var verificationDuration: Duration = .zero
        /// The format SRC was in (a migration reports it; nil when SRC is plaintext or it was not read).
        public var sourceFormat: CipherFormat?
        /// A migration in place replaced SRC, but SRC's directory could not be synced: a power loss now may bring
        /// the old file back. The error says why.
        public var replacementNotSynced: FMDatabaseError?
        /// The copy is complete, verified and in place, but its private directory (`.DEST.fmdb-cipher-PID-X`)
        /// could not be removed after it, tried twice (an I/O error): the error names the directory and why. It
        /// holds nothing the copy needs; the next copy to DEST removes it once this process is gone (unless it
        /// holds the replaced DEST as `old.db`, which is left for you to remove).
        public var stagingDirectoryNotRemoved: FMDatabaseError?
    }

    /// The database to copy.
    public var source: String
    /// SRC's key (nil: SRC is plaintext).
    public var sourceKeyProvider: (any KeyProvider)?
    /// The cipher settings SRC is opened with.
    public var sourceSettings: CipherSettings
    /// Where the copy goes.
    public var destination: String
    /// The copy's key (nil: a plaintext copy).
    public var destinationKeyProvider: (any KeyProvider)?
    /// The copy's cipher settings (page size, KDF iterations, format, the choices an app makes); those left
    /// nil are filled in from ``destinationKeyProvider``'s ``KeyProvider/cipherSettings``.
    ///
    /// A plaintext header is kept or dropped only when asked: with `plaintextHeaderSize` nil, an encrypted
    /// copy of a SRC opened with a plaintext header keeps it, with SRC's size and salt (so the app that
    /// wrote SRC, which keeps that salt, opens the copy with its new key); 0 drops it (the copy holds a new
    /// salt in its first 16 bytes, as SQLCipher's default files do); another size writes that one (with
    /// `salt`, or SRC's). ``writtenSettings`` says what the copy gets.
    public var destinationSettings: CipherSettings
    /// The key slot file that goes with the copy (default `.none`).
    public var slotFile: SlotFile = .none
    /// Replace what is at DEST and `DEST-keyslots` (default false: refused with ``Failure/destinationExists``).
    /// A copy without slots that replaces a slotted DEST removes `DEST-keyslots`
    /// (``Report/removedDestinationSlotFile``).
    public var replacesExisting = false
    /// Called with each ``Stage`` as the copy reaches it, on the calling thread.
    public var onStage: ((Stage) -> Void)?
    /// Whether a `.source` slot file is also published as `DEST-keyslots` (false for an in-place migration,
    /// whose SRC keeps its own).
    var publishesSlotFile = true

    /// A copy of `source` (keyed with `keyProvider` and `settings`; nil: plaintext) to `destination` (keyed
    /// with `destinationKeyProvider` and `destinationSettings`; nil: plaintext). Change any option, then ``run()``.
    public init(
        from source: String, keyProvider: (any KeyProvider)? = nil, settings: CipherSettings = CipherSettings(),
        to destination: String, destinationKeyProvider: (any KeyProvider)? = nil,
        destinationSettings: CipherSettings = CipherSettings()
    ) {
        self.source = source
        self.sourceKeyProvider = keyProvider
        self.sourceSettings = settings
        self.destination = destination
        self.destinationKeyProvider = destinationKeyProvider
        self.destinationSettings = destinationSettings
    }

    // MARK: - The common copies

    /// Encrypts the plaintext database at `source` into a new file at `destination`.
    ///
    /// ```swift
    /// try FMDatabaseCopy.encrypt("plain.db", to: "app.db", keyProvider: PassphraseKeyProvider("secret"))
    /// ```
    /// - Throws: ``FMDatabaseError`` (see the type).
    @discardableResult
    public static func encrypt(
        _ source: String, to destination: String, keyProvider: any KeyProvider,
        settings: CipherSettings = CipherSettings(), replacingExisting: Bool = false
    ) throws -> Report {
        var copy = FMDatabaseCopy(
            from: source, to: destination, destinationKeyProvider: keyProvider, destinationSettings: settings)
        copy.replacesExisting = replacingExisting
        return try copy.run()
    }

    /// Decrypts the encrypted database at `source` into a new plaintext file at `destination` (readable by
    /// whoever can read the file: 0600 keeps it to its owner).
    ///
    /// ```swift
    /// try FMDatabaseCopy.decrypt("app.db", keyProvider: PassphraseKeyProvider("secret"), to: "plain.db")
    /// ```
    /// - Throws: ``FMDatabaseError`` (see the type).
    @discardableResult
    public static func decrypt(
        _ source: String, keyProvider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        to destination: String, replacingExisting: Bool = false
    ) throws -> Report {
        var copy = FMDatabaseCopy(from: source, keyProvider: keyProvider, settings: settings, to: destination)
        copy.replacesExisting = replacingExisting
        return try copy.run()
    }

    /// Copies the encrypted database at `source` into a new file under another key, settings or format.
    ///
    /// ```swift
    /// try FMDatabaseCopy.export(
    ///     "app.db", keyProvider: PassphraseKeyProvider("old"),
    ///     to: "for-v3.db", destinationKeyProvider: PassphraseKeyProvider("new"),
    ///     destinationSettings: CipherSettings(format: .v3))
    /// ```
    /// - Throws: ``FMDatabaseError`` (see the type).
    @discardableResult
    public static func export(
        _ source: String, keyProvider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        to destination: String, destinationKeyProvider: any KeyProvider,
        destinationSettings: CipherSettings = CipherSettings(), replacingExisting: Bool = false
    ) throws -> Report {
        var copy = FMDatabaseCopy(
            from: source, keyProvider: keyProvider, settings: settings, to: destination,
            destinationKeyProvider: destinationKeyProvider, destinationSettings: destinationSettings)
        copy.replacesExisting = replacingExisting
        return try copy.run()
    }

    /// Writes a verified copy of the encrypted database at `source` under the same key and settings (with its
    /// slot file when it has one, opened through a ``KeySlotKeyProvider``): the backup to take before a rekey.
    ///
    /// ```swift
    /// let key = PassphraseKeyProvider("old")
    /// try FMDatabaseCopy.backup("app.db", keyProvider: key, to: "app.db.bak")
    /// let db = FMDatabase(path: "app.db")
    /// guard db.open() else { throw db.lastError() }
    /// try db.setKey(using: key)
    /// try db.rekeySafely(using: PassphraseKeyProvider("new"))
    /// ```
    /// - Throws: ``FMDatabaseError`` (see the type).
    @discardableResult
    public static func backup(
        _ source: String, keyProvider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        to destination: String, replacingExisting: Bool = false
    ) throws -> Report {
        try backup(
            source, keyProvider: keyProvider, settings: settings, to: destination, replacingExisting: replacingExisting,
            onStage: nil)
    }

    /// The backup ``backup(_:keyProvider:settings:to:replacingExisting:)`` writes, telling `onStage` its stages.
    private static func backup(
        _ source: String, keyProvider: any KeyProvider, settings: CipherSettings, to destination: String,
        replacingExisting: Bool, onStage: ((Stage) -> Void)?
    ) throws -> Report {
        var copy = FMDatabaseCopy(
            from: source, keyProvider: keyProvider, settings: settings, to: destination,
            destinationKeyProvider: keyProvider, destinationSettings: settings)
        copy.replacesExisting = replacingExisting
        copy.onStage = onStage
        if keyProvider.unwrappedKeyProvider is KeySlotKeyProvider,
            FileManager.default.fileExists(atPath: KeySlots.slotFilePath(forDatabaseAt: source))
        {
            copy.slotFile = .source
        }
        return try copy.run()
    }

    /// Rekeys the encrypted database at `path` from `keyProvider` to `newKeyProvider`, after writing a verified
    /// backup of it under the old key to `backup` (``backup(_:keyProvider:settings:to:replacingExisting:)``).
    /// The rekey is ``FMDatabase/rekeySafely(using:busyTimeout:)``: which key opens the file afterwards is
    /// checked on a fresh connection, never taken from SQLCipher's answer.
    ///
    /// ```swift
    /// let outcome = try FMDatabaseCopy.rekeyWithBackup(
    ///     "app.db", keyProvider: PassphraseKeyProvider("old"), to: PassphraseKeyProvider("new"),
    ///     backup: "app.db.bak",
    ///     onBackup: { report in print("backup: \(report.sourceBytes) bytes") },
    ///     onRekey: { _ in print("rekeying") })
    /// ```
    /// - Parameters:
    ///   - path: The encrypted database to rekey.
    ///   - keyProvider: Its current key.
    ///   - settings: The cipher settings it is opened with (the backup gets the same).
    ///   - newKeyProvider: The new key.
    ///   - backup: Where the backup goes.
    ///   - replacingExisting: Replace what is at `backup` (see ``replacesExisting``).
    ///   - busyTimeout: Seconds the rekey waits for other connections' locks.
    ///   - onStage: Called with each ``Stage`` of the backup, as a copy's ``onStage``: a program that removes
    ///     partial output on a signal registers the backup's private directory here.
    ///   - onBackup: Called with the backup's ``Report`` once it is verified and in place, before the database
    ///     is opened for the rekey: a program ends the backup's progress here.
    ///   - onRekey: Called with the database's format once it is open under its old key, right before the
    ///     rekey starts: a program starts the rekey's progress here.
    /// - Returns: `.done`, or `.checkpointPending` (the key changed; the WAL checkpoint is still to come).
    /// - Throws: ``FMDatabaseError``: a failed backup (nothing at `backup`, the database untouched); a rekey that
    ///   did not take (the old key still opens the database, and the backup is in place); an error whose
    ///   ``FMDatabaseError/rekeyOutcomeUnchecked`` is true when which key opens it could not be checked.
    ///   Which hooks were called tells which step failed: before `onBackup`, the backup; between `onBackup` and
    ///   `onRekey`, opening the database; after `onRekey`, the rekey.
    @discardableResult
    public static func rekeyWithBackup(
        _ path: String, keyProvider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        to newKeyProvider: any KeyProvider, backup: String, replacingExisting: Bool = false,
        busyTimeout: TimeInterval = 5, onStage: ((Stage) -> Void)? = nil, onBackup: ((Report) -> Void)? = nil,
        onRekey: ((CipherFormat?) -> Void)? = nil
    ) throws -> FMRekeyOutcome {
        let report = try Self.backup(
            path, keyProvider: keyProvider, settings: settings, to: backup, replacingExisting: replacingExisting,
            onStage: onStage)
        onBackup?(report)
        let db = try open(path, keyProvider: keyProvider, settings: settings, readOnly: false, creatingAttached: false)
        defer { db.close() }
        onRekey?(db.cipherFormat)
        return try db.rekeySafely(using: newKeyProvider, busyTimeout: busyTimeout)
    }

    /// The settings the copy is written (and verified) with: ``destinationSettings`` filled in from the
    /// destination provider's, keeping SRC's plaintext header and salt unless `plaintextHeaderSize` is given
    /// (see ``destinationSettings``). A copy without a plaintext header gets a fresh salt unless
    /// ``destinationSettings`` names one, and one in SQLCipher 3's format keeps no header. A plaintext copy
    /// gets none.
    ///
    /// ```swift
    /// let copy = FMDatabaseCopy(
    ///     from: "shared.db", keyProvider: old, settings: CipherSettings(plaintextHeaderSize: 32, salt: salt),
    ///     to: "copy.db", destinationKeyProvider: new)
    /// copy.writtenSettings.plaintextHeaderSize  // 32: kept
    /// ```
    public var writtenSettings: CipherSettings {
        guard let destinationKeyProvider else { return destinationSettings }
        var written = Self.settings(
            destinationSettings.filling(from: destinationKeyProvider.cipherSettings),
            keepingPlaintextHeaderOf: sourceSettings.filling(from: sourceKeyProvider?.cipherSettings))
        // SQLCipher 3's format has no plaintext header: a copy written in it gets none unless asked (and refused).
        if written.format == .v3, destinationSettings.plaintextHeaderSize == nil { written.plaintextHeaderSize = nil }
        // A copy with no plaintext header gets a fresh random salt unless `destinationSettings` names one: a salt
        // a provider carried for SRC's header would give a copy under the same key SRC's page keys.
        if (written.plaintextHeaderSize ?? 0) == 0, destinationSettings.salt == nil { written.salt = nil }
        return written
    }

    /// `destination` with `source`'s plaintext header size and salt when it gives no size of its own; its own
    /// salt (or else `source`'s) when it gives one above 0.
    static func settings(_ destination: CipherSettings, keepingPlaintextHeaderOf source: CipherSettings)
        -> CipherSettings
    {
        var settings = destination
        // SQLCipher 3's format has no plaintext header: a copy written in it keeps none.
        if settings.format == .v3 { return settings }
        if settings.plaintextHeaderSize == nil, let size = source.plaintextHeaderSize, size > 0 {
            settings.plaintextHeaderSize = size
        }
        if let size = settings.plaintextHeaderSize, size > 0, settings.salt == nil {
            settings.salt = source.salt
        }
        return settings
    }

    // MARK: - Running

    /// Refuses a SRC that is not an existing, non-empty regular file (`SQLITE_CANTOPEN`): opening it would create
    /// it, and a copy of an empty database verifies (no tables on either side).
    static func requireSource(_ path: String) throws {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path): \(FileSystem.describe(errno))")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path): not a regular file")
        }
        guard status.st_size > 0 else {
            throw FMDatabaseError(code: SQLITE_NOTADB, message: "\(path): is empty, not a database")
        }
    }

    /// Runs the copy: checks DEST, makes the private directory, writes the slot file, checks SRC, copies with
    /// `sqlcipher_export` (plus `user_version` and `application_id`), verifies the new file and moves it into
    /// place (see the type for each guarantee).
    /// - Returns: what it did.
    /// - Throws: ``FMDatabaseError``; nothing of the copy is left at DEST or beside it.
    @discardableResult
    public func run() throws -> Report {
        // Before anything is made: a missing SRC is never created (an empty copy of it would verify).
        try Self.requireSource(source)
        let report = onStage ?? { _ in }
        let carriesSlotFile: Bool
        switch slotFile {
        case .none: carriesSlotFile = false
        case .source: carriesSlotFile = publishesSlotFile
        case .new: carriesSlotFile = true
        }
        let output = try PrivateOutput(
            destination: destination, force: replacesExisting, source: source, carriesSlotFile: carriesSlotFile,
            report: report)
        do {
            return try copy(into: output, report: report)
        } catch {
            throw output.failing(error)
        }
    }

    /// The copy's steps after its private directory is made: the slot file, the copy, its verification and
    /// the commit.
    private func copy(into output: PrivateOutput, report: (Stage) -> Void) throws -> Report {
        let temporary = output.file
        var result = Report()
        switch slotFile {
        case .none: break
        case .source:
            report(.writingSlotFile)
            try KeySlots.copySlotFile(from: source, to: temporary)
        case .new(let secret, let kdf, let recovery):
            report(.writingSlotFile)
            let made = try KeySlots.createSlotFile(
                forNewDatabaseAt: temporary, secret: secret, kdf: kdf, addingRecoveryKey: recovery)
            result.recoveryKey = made.recoveryKey
            result.recoveryKeySlot = made.slots.first { $0.kind == .recoveryKey }
        }
        // Only the new file this run made, beside the slot file it just wrote, is created under that slot file's
        // identity: a KeySlotKeyProvider adopts no other slot file for a missing or empty database.
        let newFileProvider: (any KeyProvider)?
        if case .none = slotFile {
            newFileProvider = destinationKeyProvider
        } else {
            newFileProvider = destinationKeyProvider.map { provider in
                guard let slots = provider.unwrappedKeyProvider as? KeySlotKeyProvider else { return provider }
                let created = slots.creatingDatabase(at: temporary)
                return provider.cipherSettings.map { created.withCipherSettings($0) } ?? created
            }
        }

        report(.openingSource)
        let db = try Self.open(
            source, keyProvider: sourceKeyProvider, settings: sourceSettings, readOnly: false, creatingAttached: true)
        defer { db.close() }
        let clock = ContinuousClock()
        let sourceCheckStarted = clock.now
        report(.checkingSource)
        // A damaged SRC is refused rather than copied: sqlcipher_export would silently lose what it cannot read.
        let problems = try db.integrityProblems(quick: true)
        guard problems.isEmpty else {
            throw Self.failure(
                .sourceDamaged, SQLITE_CORRUPT,
                "\(source) fails its integrity check, so it is not copied: "
                    + "\(problems.prefix(3).joined(separator: "; "))"
            )
        }
        let expected = try db.tableRowCounts()
        result.sourceBytes = Self.fileSize(source)
        let copyStarted = clock.now
        report(.copying(file: temporary))
        let written = writtenSettings
        try db.attachDatabase(
            atPath: temporary, schema: "fmdb_cipher_dest", keyProvider: newFileProvider, settings: written)
        try db.exportContents(to: "fmdb_cipher_dest")
        try db.detachDatabase(schema: "fmdb_cipher_dest")
        let verifyStarted = clock.now
        report(.verifying)
        try verify(temporary, keyProvider: newFileProvider, settings: written, expected: expected)
        let verified = clock.now
        report(.publishing)
        result.removedDestinationSlotFile = try output.commit()
        result.stagingDirectoryNotRemoved = output.leftDirectoryError
        result.sourceCheckDuration = sourceCheckStarted.duration(to: copyStarted)
        result.copyDuration = copyStarted.duration(to: verifyStarted)
        result.verificationDuration = verifyStarted.duration(to: verified)
        return result
    }

    /// Opens the new file read-only with its own key and checks integrity and every table's row count.
    private func verify(
        _ path: String, keyProvider: (any KeyProvider)?, settings: CipherSettings,
        expected: [(name: String, rows: Int64)]
    ) throws {
        let copy = try Self.open(
            path, keyProvider: keyProvider, settings: settings, readOnly: true, creatingAttached: false)
        defer { copy.close() }
        let problems = try copy.integrityProblems()
        guard problems.isEmpty else {
            throw Self.failure(
                .verificationFailed, SQLITE_CORRUPT,
                "the new database failed its integrity check: \(problems.prefix(3).joined(separator: "; "))")
        }
        let actual = try copy.tableRowCounts()
        guard actual.map(\.name) == expected.map(\.name), actual.map(\.rows) == expected.map(\.rows) else {
            throw Self.failure(
                .verificationFailed, SQLITE_CORRUPT,
                "the new database does not hold the same tables and rows as \(source)")
        }
    }

    /// A connection of the copy's own: errors are thrown to the caller, never also logged.
    static func open(
        _ path: String, keyProvider: (any KeyProvider)?, settings: CipherSettings, readOnly: Bool,
        creatingAttached: Bool
    ) throws -> FMDatabase {
        let db = FMDatabase.internalConnection(path: path)
        // Attached databases inherit the main connection's flags: creating DEST needs SQLITE_OPEN_CREATE
        // (harmless for SRC, which exists).
        let flags =
            readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (creatingAttached ? SQLITE_OPEN_CREATE : 0)
        guard db.open(withFlags: flags) else { throw db.lastError() }
        if let keyProvider {
            do {
                try db.setKey(using: keyProvider, settings: settings)
            } catch {
                db.close()
                throw error
            }
        }
        return db
    }

    static func fileSize(_ path: String) -> Int64 {
        var status = stat()
        return stat(path, &status) == 0 ? Int64(status.st_size) : 0
    }

    /// An error the copy itself decided.
    static func failure(_ failure: Failure, _ code: Int32, _ message: String) -> FMDatabaseError {
        FMDatabaseError(code: code, message: message, marks: [], copyFailure: failure)
    }

    /// The words with which a refusal (``Failure/destinationExists``) says that replacing was not asked
    /// for: "set replacesExisting to replace it". A program whose users ask for it otherwise (a flag, a
    /// setting) may put its own words in their place; the rest of the message is the library's.
    public static let replaceHint = "set replacesExisting"
}

// Not Sendable: `onStage` is a plain closure, called on the thread that runs the copy.
@available(*, unavailable)
extension FMDatabaseCopy: Sendable {}
