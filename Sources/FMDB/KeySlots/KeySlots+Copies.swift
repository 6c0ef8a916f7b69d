import CSQLCipher
import Foundation

/// Copies of a slotted database that keep its slots: the copy keeps the data key and the source's salt
/// (its identity), so the source's slot file opens it byte for byte, and only the one secret that
/// unlocks the source is needed.
///
/// How: the slot file goes beside the new path first (`copySlotFile(from:to:)`); a
/// ``KeySlotKeyProvider`` asked to create that path (`creatingDatabase(at:)`), keying it while it does not
/// exist yet (or is empty), reads the slot file beside it and answers with the data key *and* the slot
/// file's salt (SQLCipher's raw key with salt, `x'<64 hex key><32 hex salt>'`, on 3.4.1 and 4.x alike),
/// so SQLCipher writes that salt
/// into the new file's header. `createSlotFile(forNewDatabaseAt:secret:kdf:addingRecoveryKey:)` does
/// the same for a new slotted database made from other contents (`fmdb-cipher encrypt --kdf slot`).
extension KeySlots {
    /// Copies the slot file of the slotted database at `sourceDatabase`, byte for byte, to the slot file
    /// path of `destinationDatabase` (`<destinationDatabase>-keyslots`), for a copy of the database that
    /// keeps its identity (data key and salt).
    ///
    /// Then export the contents through a ``KeySlotKeyProvider`` asked to create the destination
    /// (`creatingDatabase(at:)`): for a destination that does not exist yet it answers with the data key and
    /// the slot file's salt, so the copy's header holds the
    /// source's salt and every slot of the source opens it. One key derivation for the whole copy when
    /// the same provider opens the source, creates the copy and verifies it.
    ///
    /// ```swift
    /// try KeySlots.copySlotFile(from: "app.db", to: "copy.db")
    /// let provider = KeySlotKeyProvider(secret: .passphrase("ops"))
    /// let db = FMDatabase(path: "app.db")
    /// guard db.open() else { throw db.lastError() }
    /// try db.setKey(using: provider)
    /// try db.attachDatabase(atPath: "copy.db", schema: "copy", keyProvider: provider.creatingDatabase(at: "copy.db"))
    /// try db.exportContents(to: "copy")   // any CipherSettings (page size, format) may be given above
    /// try db.detachDatabase(schema: "copy")
    /// ```
    ///
    /// The slot file is written as every slot file is (a temporary file, `O_CREAT|O_EXCL|O_NOFOLLOW`,
    /// mode 0600, `fsync`), and appears only if nothing is at its path (link(2), which never follows a
    /// symbolic link). Its shape is checked, and that it belongs to `sourceDatabase` (same salt); its tag
    /// is checked by whoever unlocks it.
    /// - Throws: `FMDatabaseError`: SQLITE_CANTOPEN when the source's slot file is missing or anything is
    ///   at the destination's slot file path; SQLITE_CORRUPT for a damaged slot file; SQLITE_NOTADB when
    ///   it belongs to another database.
    /// - Note: FMDB compatibility: FMDB has no key slots; this is an addition.
    public static func copySlotFile(from sourceDatabase: String, to destinationDatabase: String) throws {
        let sourceSlots = slotFilePath(forDatabaseAt: sourceDatabase)
        let bytes = try KeySlotStorage.read(sourceSlots)
        let parsed = try KeySlotFile.parse(bytes)
        guard parsed.file.databaseSalt == (try databaseSalt(sourceDatabase)) else {
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message:
                    "The key slot file \(sourceSlots) belongs to another database (its salt is not this database's)."
            )
        }
        try KeySlotStorage.writeAtomically(
            bytes, to: slotFilePath(forDatabaseAt: destinationDatabase), replacing: false
        ).requireSynced()
    }

    /// Runs `body` holding the exclusive lock that serializes changes of the slot file of the database at
    /// `path` (`flock` on `<path>-keyslots.lock`, created 0600 if needed), the lock every slot change, data
    /// key rotation and ``FMDatabaseCopy`` publishing or replacing a slotted database takes: while `body`
    /// runs, no slot changes and no copy replaces the pair, so a program can read or back up the database and
    /// its slot file as one consistent pair.
    ///
    /// ```swift
    /// try KeySlots.withSlotFileLock(forDatabaseAt: "app.db") {
    ///     try FileManager.default.copyItem(atPath: "app.db-keyslots", toPath: "/backup/app.db-keyslots")
    /// }
    /// ```
    ///
    /// `body` must not change that slot file through `KeySlots` (the lock is not reentrant: it would wait for
    /// itself).
    /// - Throws: `FMDatabaseError` (`SQLITE_CANTOPEN` when the lock file cannot be opened), or what `body` throws.
    /// - Note: FMDB compatibility: FMDB has no key slots; this is an addition.
    public static func withSlotFileLock<T>(forDatabaseAt path: String, _ body: () throws -> T) throws -> T {
        try KeySlotStorage.withExclusiveLock(forSlotFile: slotFilePath(forDatabaseAt: path), body)
    }

    /// Writes the slot file of a slotted database that does not exist yet: a fresh random data key and
    /// salt, one slot for `secret` and, when `addingRecoveryKey`, a slot for a generated recovery key.
    /// The database is then made by whatever first keys `path` with a ``KeySlotKeyProvider`` asked to create
    /// it (`creatingDatabase(at: path)`, which answers with the data key and the slot file's salt): an open,
    /// or an `attachDatabase` + `exportContents` that fills it from another database.
    ///
    /// ```swift
    /// let made = try KeySlots.createSlotFile(
    ///     forNewDatabaseAt: "app.db", secret: .passphrase("admin"), addingRecoveryKey: true)
    /// made.recoveryKey?.withFormattedText { FileHandle.standardOutput.write(Data($0)) }   // shown once
    /// let plain = FMDatabase(path: "plain.db")
    /// guard plain.open() else { throw plain.lastError() }
    /// let provider = KeySlotKeyProvider(secret: .passphrase("admin")).creatingDatabase(at: "app.db")
    /// try plain.attachDatabase(atPath: "app.db", schema: "enc", keyProvider: provider)
    /// try plain.exportContents(to: "enc")
    /// ```
    ///
    /// `KeySlots.createDatabase` is the simpler call for an empty new database (it also creates the
    /// database file, 0600).
    /// - Returns: the slots made (slot 1 for `secret`, slot 2 for the recovery key) and the recovery key,
    ///   to be shown once.
    /// - Throws: `FMDatabaseError`: SQLITE_CANTOPEN when `path` holds a database (anything but nothing or
    ///   an empty file) or anything is at the slot file path; SQLITE_MISUSE for a recovery key as `secret`
    ///   or KDF parameters below the floor.
    /// - Note: FMDB compatibility: FMDB has no key slots; this is an addition.
    @discardableResult
    public static func createSlotFile(
        forNewDatabaseAt path: String, secret: KeySlotSecret, kdf: KeySlotKDF = .default,
        addingRecoveryKey: Bool = false
    ) throws -> (slots: [KeySlotInfo], recoveryKey: RecoveryKey?) {
        let secret = try secret.validated()
        guard secret.kind != .recoveryKey else {
            throw FMDatabaseError.misuse(
                "Recovery keys are generated, not given: use a passphrase or raw key, and addingRecoveryKey.")
        }
        if secret.kind == .passphrase { try kdf.validate() }
        guard DatabaseFile.kind(atPath: path).isNew else {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN,
                message: "\(path) is not a new database: a slot file is made for a database to be created.")
        }
        let dataKey = try secureRandomBytes(KeySlotCrypto.dataKeyLength)
        let salt = try secureRandomBytes(16).withUnsafeBytes { Data($0) }
        let keys = [1: dataKey]
        var file = KeySlotFile(
            body: .init(
                version: KeySlotFile.version, databaseSalt: salt.hexString,
                generation: 1, pendingGeneration: nil, slots: []))
        file.body.slots = [try file.makeSlot(id: 1, secret: secret, kdf: kdf, dataKeys: keys)]
        var recovery: RecoveryKey?
        if addingRecoveryKey {
            let generated = try RecoveryKeyCode.generate()
            let recoverySecret = KeySlotSecret(kind: .recoveryKey, bytes: generated.bytes)
            file.body.slots.append(try file.makeSlot(id: 2, secret: recoverySecret, kdf: .default, dataKeys: keys))
            recovery = RecoveryKey(text: generated.text)
        }
        try KeySlotStorage.writeAtomically(
            file.serialized(dataKeys: keys), to: slotFilePath(forDatabaseAt: path), replacing: false
        )
        .requireSynced()
        return (file.body.slots.map(info), recovery)
    }
}
