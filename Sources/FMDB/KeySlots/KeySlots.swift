import CSQLCipher
import Foundation
import Logging

/// Key slots ("envelope keys"): a database encrypted with a random 256-bit data key that is never
/// shown or stored in clear, and any number of ways to unlock it — passphrases, raw keys, a recovery
/// key — each a slot in a small file beside the database (`<database>-keyslots`) that holds the data
/// key wrapped (AES-256-GCM) under a key-encryption key made from that secret.
///
/// Changing a passphrase rewrites one slot: one key derivation and one small atomic file write,
/// whatever the database's size; the data pages are not touched. `rotateDataKey` is the real rekey
/// (every page), for when the data key itself may have leaked.
///
/// ```swift
/// try KeySlots.createDatabase(at: path, secret: .passphrase("admin passphrase"))
/// try KeySlots.addSlot(to: path, unlockingWith: .passphrase("admin passphrase"), newSecret: .passphrase("ops"))
/// let (_, recovery) = try KeySlots.addRecoverySlot(to: path, unlockingWith: .passphrase("ops"))
/// let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("ops")))
/// ```
///
/// The database is SQLCipher's raw-key mode: it opens in the `sqlcipher` shell of either line with
/// `PRAGMA key = "x'<hex of the data key>'"` (`withDataKeyHex`, for escrow). Changes to the slot file
/// are serialized between processes with an exclusive `flock` on `<database>-keyslots.lock`. A copy
/// keeps its slots when it keeps the data key and the salt: `copySlotFile(from:to:)`, then export
/// through a ``KeySlotKeyProvider`` (`createSlotFile` for a new slotted database filled from others).
///
/// - Note: FMDB compatibility: FMDB has no key slots; this is an addition.
public enum KeySlots {
    /// Runs `operation` with `receiver` getting the warnings of the slot changes it makes: changes that took
    /// but may not survive a power loss (a directory that could not be synced after the new slot file was in
    /// place), or that left the slot file pending (a rotation whose last slot file write failed). Without a
    /// receiver they go to the "fmdb" logger at warning level. The receiver holds for the slot changes made
    /// inside `operation`, on the calling task (and its child tasks), and for no other caller. A warning
    /// never holds key bytes.
    ///
    /// ```swift
    /// try KeySlots.withWarningReceiver({ print("warning: \($0)") }) {
    ///     try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("admin")])
    /// }
    /// ```
    public static func withWarningReceiver<T>(
        _ receiver: @escaping @Sendable (String) -> Void, operation: () throws -> T
    ) rethrows -> T {
        try $warningSink.withValue(WarningSink(receive: receiver), operation: operation)
    }

    /// The receiver `withWarningReceiver` set, as a task-local value. A task-local value's type is a struct,
    /// never a function type: Swift 6.3's optimizer specializes `TaskLocal.withValue` for an (optional)
    /// function type with metadata the runtime cannot read, and the optimized build crashes in
    /// `swift_task_localValuePush` (the debug build works).
    struct WarningSink: Sendable {
        let receive: @Sendable (String) -> Void
    }

    @TaskLocal static var warningSink: WarningSink?

    static func warn(_ text: String) {
        if let sink = warningSink {
            sink.receive(text)
        } else {
            Logger(label: "fmdb").warning("\(text)")
        }
    }

    /// The slot file of the database at `databasePath`: `<databasePath>-keyslots`.
    public static func slotFilePath(forDatabaseAt databasePath: String) -> String {
        KeySlotFile.path(forDatabaseAt: databasePath)
    }

    /// Creates a new encrypted database at `path` with a fresh random data key, and its slot file with
    /// one slot for `secret`.
    ///
    /// ```swift
    /// try KeySlots.createDatabase(at: "/var/lib/app/app.db", secret: .passphrase("correct horse"))
    /// ```
    /// - Returns: the first slot.
    ///
    /// The database is made under a hidden staging name beside `path` (`.<name>.fmdb-init-<random>`, created
    /// by the library with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600 whatever the umask, before SQLite opens
    /// it), then its slot file appears at the slot path (`link(2)`, never over anything) and the directory is
    /// synced, and only then the database appears at `path` (`link(2)`, never over anything, then the staging
    /// name goes). So `path` never holds a database without its slot file: a crash or failure leaves nothing
    /// at `path`, or the whole database. What a crash leaves behind (staging files; a slot file whose only
    /// database is a staging file) is recognised and removed by the next `createDatabase` at `path` and by
    /// every slot change; nothing else beside `path` is touched. When the last directory sync fails the
    /// database is made and `createDatabase` returns; the warning (``KeySlots``' warning receiver, else the
    /// "fmdb" logger) says a power loss may undo it.
    /// - Throws: `FMDatabaseError`: SQLITE_CANTOPEN when anything (a file, even empty, or a link, even
    ///   dangling) is at the database's path or its slot file's (other than the leftovers above), or it
    ///   cannot be created; SQLITE_IOERR / SQLITE_FULL when a write fails (nothing is then at `path`);
    ///   SQLITE_MISUSE for KDF parameters below the floor.
    @discardableResult
    public static func createDatabase(at path: String, secret: KeySlotSecret, kdf: KeySlotKDF = .default) throws
        -> KeySlotInfo
    {
        let secret = try secret.validated()
        guard secret.kind != .recoveryKey else {
            throw FMDatabaseError.misuse(
                "Recovery keys are generated, not given: create with a passphrase or raw key, then addRecoverySlot.")
        }
        if secret.kind == .passphrase { try kdf.validate() }
        let slotPath = slotFilePath(forDatabaseAt: path)
        return try KeySlotStorage.withExclusiveLock(forSlotFile: slotPath) {
            // A killed creation (or slot change) may have left its temporary slot file: it goes first.
            KeySlotStorage.removeStaleTemporaries(of: slotPath)
            var existing = stat()
            // lstat: nothing at all may be there, not even a dangling symbolic link (SQLite would follow it).
            guard lstat(path, &existing) != 0, errno == ENOENT else {
                throw FMDatabaseError(
                    code: SQLITE_CANTOPEN, message: "\(path) already exists: key slots are set up on a new database.")
            }
            removeCreationLeftovers(of: path)
            guard lstat(slotPath, &existing) != 0, errno == ENOENT else {
                throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "The key slot file \(slotPath) already exists.")
            }
            let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
            let staging =
                directory + "/" + creationPrefix(of: path) + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let dataKey = try secureRandomBytes(KeySlotCrypto.dataKeyLength)
            let salt = try secureRandomBytes(16)
            // The library makes the file itself, private whatever the umask and never through a link;
            // SQLite then opens that file (and makes its journal with the same mode).
            let created = try createPrivateFile(staging)
            defer { close(created.fd) }
            let db = FMDatabase.internalConnection(path: staging)
            var slotBytes: Data?
            var published = false
            do {
                guard db.open(withFlags: SQLITE_OPEN_READWRITE) else { throw db.lastError() }
                try db.setKey(using: RawKeyProvider(key: .raw(secure: dataKey, salt: salt)))
                db.close()
                // What SQLite wrote must be the file made above, not something swapped in at the name meanwhile.
                guard isFile(staging, created.info) else {
                    throw FMDatabaseError(
                        code: SQLITE_CANTOPEN, message: "\(staging) was replaced while the database was being created.")
                }
                let saltData = salt.withUnsafeBytes { Data($0) }
                guard DatabaseFile.kind(atPath: staging) == .encrypted(salt: saltData) else {
                    throw FMDatabaseError(
                        code: SQLITE_ERROR,
                        message: "The new database's header does not hold the salt it was created with.")
                }
                var file = KeySlotFile(
                    body: .init(
                        version: KeySlotFile.version, databaseSalt: saltData.hexString,
                        generation: 1, pendingGeneration: nil, slots: []))
                let slot = try file.makeSlot(id: 1, secret: secret, kdf: kdf, dataKeys: [1: dataKey])
                file.body.slots = [slot]
                let bytes = try file.serialized(dataKeys: [1: dataKey])
                // (1) The slot file, durable before the database appears (it opens nothing without it).
                let durability = try KeySlotStorage.writeAtomically(bytes, to: slotPath, replacing: false)
                slotBytes = bytes
                try durability.requireSynced()
                // (2) The database at `path`, beside its slot file; never over anything there.
                if link(staging, path) != 0 {
                    let error = KeySlotStorage.ioError("create \(path)")
                    // An error from link(2) does not prove it did not happen: the path is asked.
                    guard isFile(path, created.info) else { throw error }
                }
                published = true
                unlink(staging)
                if let failure = KeySlotStorage.syncDirectory(directory) {
                    warn(
                        "\(path) and its key slot file were created, but the directory could not be synced "
                            + "(\(failure.message)): a power loss may undo the creation until the file system is "
                            + "synced.")
                }
                return info(slot)
            } catch {
                db.close()
                if !published {
                    // Only what this call made goes: the slot file if it still holds these bytes, the staging files.
                    if let slotBytes, KeySlotStorage.holds(slotPath, slotBytes) { unlink(slotPath) }
                    if isFile(staging, created.info) { unlink(staging) }
                    for suffix in ["-journal", "-wal", "-shm"] { unlink(staging + suffix) }
                }
                throw error
            }
        }
    }

    /// The staging names of `createDatabase` for `path` begin with this: `.<name>.fmdb-init-`.
    static func creationPrefix(of path: String) -> String {
        "." + URL(fileURLWithPath: path).lastPathComponent + ".fmdb-init-"
    }

    /// Whether `path` (not followed) is the file `identity` describes.
    private static func isFile(_ path: String, _ identity: stat) -> Bool {
        var now = stat()
        return lstat(path, &now) == 0 && (now.st_mode & S_IFMT) == S_IFREG
            && now.st_dev == identity.st_dev && now.st_ino == identity.st_ino
    }

    /// Removes what an interrupted `createDatabase` of `path` left (call holding the slot file's lock): its
    /// staging files (`.<name>.fmdb-init-*`, with their journals) that are not the only name of a published
    /// database (nothing is at `path`, or the staging file is a second name of the database at `path`), and,
    /// when nothing is at `path`, a slot file whose database is one of those never-published staging files
    /// (its salt is theirs): it opens nothing anywhere else.
    static func removeCreationLeftovers(of path: String) {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        let prefix = creationPrefix(of: path)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory),
            names.contains(where: { $0.hasPrefix(prefix) })
        else { return }
        var database = stat()
        let databaseExists = lstat(path, &database) == 0
        let slotPath = slotFilePath(forDatabaseAt: path)
        let slotSalt = (try? KeySlotFile.parse(KeySlotStorage.read(slotPath)))?.file.databaseSalt
        var slotFileIsLeftover = false
        for name in names where name.hasPrefix(prefix) {
            let staged = directory + "/" + name
            var info = stat()
            guard lstat(staged, &info) == 0 else { continue }
            if databaseExists {
                // Only a second name of the database at `path` (a crash between link and unlink) goes.
                guard (info.st_mode & S_IFMT) == S_IFREG, info.st_dev == database.st_dev, info.st_ino == database.st_ino
                else { continue }
                unlink(staged)
                continue
            }
            if (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1, let slotSalt,
                case .encrypted(let salt) = DatabaseFile.kind(atPath: staged), salt == slotSalt
            {
                slotFileIsLeftover = true
            }
            unlink(staged)
        }
        if slotFileIsLeftover, !databaseExists { unlink(slotPath) }
    }

    /// Creates the new database file: `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600 (also `fchmod`, whatever the
    /// umask). Returns its descriptor and identity.
    private static func createPrivateFile(_ path: String) throws -> (fd: Int32, info: stat) {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let number = errno
            let reason = number == EEXIST || number == ELOOP ? "it already exists" : String(cString: strerror(number))
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "Cannot create the database \(path): \(reason).")
        }
        var info = stat()
        guard fchmod(fd, 0o600) == 0, fstat(fd, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(path)
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "Cannot create the database \(path): \(reason).")
        }
        return (fd, info)
    }

    /// The slots of the database at `path`: ids, kinds, creation times and KDFs — no secrets. Needs no
    /// key; only the file's shape is checked (its tag is checked by every operation that unlocks).
    ///
    /// ```swift
    /// for slot in try KeySlots.list(forDatabaseAt: path) {
    ///     print(slot)  // "1 passphrase scrypt N=32768 r=8 p=1 ..."
    /// }
    /// ```
    /// - Throws: `FMDatabaseError` (SQLITE_CANTOPEN missing, SQLITE_CORRUPT damaged).
    public static func list(forDatabaseAt path: String) throws -> [KeySlotInfo] {
        let parsed = try KeySlotFile.parse(KeySlotStorage.read(slotFilePath(forDatabaseAt: path)))
        return parsed.file.body.slots.map(info)
    }

    /// Adds a slot for `newSecret`, after unlocking the data key with `secret` (any existing slot).
    ///
    /// ```swift
    /// try KeySlots.addSlot(to: path, unlockingWith: .passphrase("admin"), newSecret: .passphrase("service"))
    /// ```
    /// - Returns: the new slot.
    /// - Throws: `FMDatabaseError` (SQLITE_NOTADB when no slot accepts `secret`; SQLITE_MISUSE when
    ///   `newSecret` already opens a slot: a second slot for one secret could not be revoked on its own; or
    ///   when the new slot would put the slots of its kind over the work an unlock may spend trying them in
    ///   turn; see `KeySlotKeyProvider`).
    @discardableResult
    public static func addSlot(
        to path: String, unlockingWith secret: KeySlotSecret, newSecret: KeySlotSecret, kdf: KeySlotKDF = .default
    ) throws -> KeySlotInfo {
        let newSecret = try newSecret.validated()
        guard newSecret.kind != .recoveryKey else {
            throw FMDatabaseError.misuse("Recovery keys are generated, not given: use addRecoverySlot.")
        }
        return try modify(path, unlockingWith: secret) { file, keys, _ in
            try refuseSecretThatOpensASlot(newSecret, in: file)
            let slot = try file.makeSlot(id: nextID(file), secret: newSecret, kdf: kdf, dataKeys: keys)
            file.body.slots.append(slot)
            try KeySlotWorkBudget.refuseGrowth(file, kind: newSecret.kind)
            return info(slot)
        }
    }

    /// Adds a slot for a freshly generated recovery key, which is returned to be shown once.
    ///
    /// ```swift
    /// let (slot, recovery) = try KeySlots.addRecoverySlot(to: path, unlockingWith: .passphrase("admin"))
    /// print("Recovery key (slot \(slot.id)): \(recovery.formattedText)")
    /// ```
    public static func addRecoverySlot(to path: String, unlockingWith secret: KeySlotSecret) throws -> (
        slot: KeySlotInfo, key: RecoveryKey
    ) {
        let generated = try RecoveryKeyCode.generate()
        let recovery = KeySlotSecret(kind: .recoveryKey, bytes: generated.bytes)
        let slot = try modify(path, unlockingWith: secret) { file, keys, _ in
            let slot = try file.makeSlot(id: nextID(file), secret: recovery, kdf: .default, dataKeys: keys)
            file.body.slots.append(slot)
            return info(slot)
        }
        return (slot, RecoveryKey(text: generated.text))
    }

    /// Removes slot `id`. The last slot is never removed (the data would be lost).
    ///
    /// ```swift
    /// try KeySlots.removeSlot(2, from: path, unlockingWith: .passphrase("admin"))
    /// ```
    ///
    /// When `secret` is the removed slot's own secret, the removal is a revocation, checked on the slot file
    /// as written: `secret` must open no slot afterwards. A secret that also opens another slot (two slots
    /// made for one secret before `addSlot` refused that) is refused: `changeSlot` merges its slots into one.
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE: no such slot, the last one, or `secret` opens the removed
    ///   slot and another).
    public static func removeSlot(_ id: Int, from path: String, unlockingWith secret: KeySlotSecret) throws {
        let secret = try secret.validated()
        var revoking = false
        try modify(path, unlockingWith: secret, revoking: { revoking ? secret : nil }) { file, _, _ in
            guard file.body.slots.contains(where: { $0.id == id }) else {
                throw FMDatabaseError.misuse("There is no key slot \(id).")
            }
            guard file.body.slots.count > 1 else {
                throw FMDatabaseError.misuse(
                    "Slot \(id) is the last key slot: removing it would make the database unreadable.")
            }
            let opened = try file.slotIDs(openedBy: secret)
            if opened.contains(id) {
                let others = opened.filter { $0 != id }
                guard others.isEmpty else {
                    throw FMDatabaseError.misuse(
                        "The secret of key slot \(id) also opens slot(s) "
                            + "\(others.map(String.init).joined(separator: ", ")): removing slot \(id) would not "
                            + "revoke it. Change that secret (its slots are merged into one), then remove that slot."
                    )
                }
                revoking = true
            }
            file.body.slots.removeAll { $0.id == id }
        }
    }

    /// Replaces the secret of the slot `old` opens with `new` (same slot id): one key derivation and one
    /// small file write; the database's pages are untouched, and `old` no longer opens it.
    ///
    /// ```swift
    /// try KeySlots.changeSlot(of: path, from: .passphrase("old"), to: .passphrase("new"))
    /// ```
    ///
    /// The revocation is checked on the slot file as written: `old` opens no slot afterwards. When `old`
    /// opens several slots (made for one secret before `addSlot` refused that), the first is changed and
    /// the others are removed.
    /// - Throws: `FMDatabaseError`: SQLITE_MISUSE when `new` already opens a slot, or when the changed slot
    ///   would put the slots of its kind over the work an unlock may spend trying them in turn; see
    ///   `KeySlotKeyProvider`.
    /// - Note: someone who kept a copy of the old slot file and knows the old secret can still unwrap
    ///   the data key from that copy. Use `rotateDataKey` when that matters.
    @discardableResult
    public static func changeSlot(
        of path: String, from old: KeySlotSecret, to new: KeySlotSecret, kdf: KeySlotKDF = .default
    ) throws -> KeySlotInfo {
        let new = try new.validated()
        guard new.kind != .recoveryKey else {
            throw FMDatabaseError.misuse(
                "Recovery keys are generated, not given: use addRecoverySlot, then removeSlot.")
        }
        let old = try old.validated()
        return try modify(path, unlockingWith: old, revoking: { old }) { file, keys, unlockedID in
            try refuseSecretThatOpensASlot(new, in: file)
            guard let index = file.body.slots.firstIndex(where: { $0.id == unlockedID }) else {
                throw FMDatabaseError.misuse("Internal: the unlocked slot vanished.")
            }
            // Every other slot `old` opens goes: `old` must open nothing afterwards.
            let duplicates = Set(try file.slotIDs(openedBy: old)).subtracting([unlockedID])
            let slot = try file.makeSlot(id: unlockedID, secret: new, kdf: kdf, dataKeys: keys)
            file.body.slots[index] = slot
            file.body.slots.removeAll { duplicates.contains($0.id) }
            try KeySlotWorkBudget.refuseGrowth(file, kind: new.kind)
            return info(slot)
        }
    }

    /// Calls `body` with the data key as 64 lower-case hexadecimal digits (in wiped memory), for escrow or
    /// for the `sqlcipher` shell (`PRAGMA key = "x'<hex>'"`). Whoever holds it can read the database
    /// without any slot; `body` must not keep the bytes.
    ///
    /// ```swift
    /// try KeySlots.withDataKeyHex(of: path, unlockingWith: .recoveryKey(typed)) { hex in
    ///     _ = write(escrowFD, hex.baseAddress, hex.count)
    /// }
    /// ```
    /// - Throws: `FMDatabaseError` (see `KeySlotKeyProvider`), or what `body` throws.
    public static func withDataKeyHex<R>(
        of path: String, unlockingWith secret: KeySlotSecret, _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        let slotPath = slotFilePath(forDatabaseAt: path)
        let salt = try databaseSalt(path)
        let opened = try unlock(
            KeySlotStorage.read(slotPath), secret: secret.validated(), slotID: nil, databaseSalt: salt,
            slotPath: slotPath)
        // Only a key the database positively opens with is handed out for escrow.
        let key = try opened.currentDataKey(databasePath: path, verifying: true)
        return try key.hex(.lowercase).withUnsafeBytes(body)
    }

    /// Rotates the data key itself: a real rekey through the library's rekey path (every page is
    /// re-encrypted under a new random key), and every slot rewritten to wrap the new key.
    ///
    /// Every slot must be opened by one of `secrets` (a slot's key-encryption key is needed to wrap the
    /// new key); slots none opens make it fail, unless `droppingUnmatchedSlots`, which removes them.
    ///
    /// Crash-safe order: (1) the slot file is replaced by one that wraps both the old and the new data
    /// key (a pending rotation); (2) the database is rekeyed (one SQLite transaction: the file is under
    /// exactly one of the two keys at any moment); (3) the slot file is replaced by one that wraps only
    /// the new key. After a crash between (1) and (3), opening finds which of the two keys the database
    /// is under, and the next slot change finishes the file.
    ///
    /// ```swift
    /// try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("admin"), .passphrase("ops")])
    /// ```
    /// Its outcome is the one every rekey has (`FMRekeyOutcome`, as `FMDatabase.rekeySafely`), decided by
    /// which key opens the file:
    /// - it **throws**: not done, the old data key still opens the database (SQLITE_BUSY when another
    ///   connection held it; the old slot file is put back). When after a failure neither key could be
    ///   checked, the pending slot file (which wraps both keys) is left in place: it opens the database
    ///   whichever key it is under, and the next slot change settles it. SQLITE_CORRUPT: neither key opens it;
    /// - `.done`: only the new data key opens the database. Should the last slot file write (3) fail, the
    ///   rotation is still done: the file stays pending, opens through every kept slot, and is finished
    ///   by the next slot change (a warning goes to the receiver of `withWarningReceiver`, else the "fmdb"
    ///   logger). Should the pending file (1) be in place but its directory not sync, the database is not
    ///   rekeyed: it throws, not done, and the old slot file is put back;
    /// - `.checkpointPending(error)`: only the new key opens the database, but the WAL checkpoint could not
    ///   run (another connection was reading): until a later checkpoint the main file still holds pages
    ///   under the old data key.
    @discardableResult
    public static func rotateDataKey(of path: String, secrets: [KeySlotSecret], droppingUnmatchedSlots: Bool = false)
        throws -> FMRekeyOutcome
    {
        try rotateDataKey(of: path, secrets: secrets, droppingUnmatchedSlots: droppingUnmatchedSlots, finishing: true)
    }

    /// `rotateDataKey`; without `finishing` it stops before the last slot file write (3), as a crash there
    /// would (tests).
    static func rotateDataKey(
        of path: String, secrets: [KeySlotSecret], droppingUnmatchedSlots: Bool, finishing: Bool,
        busyTimeout: TimeInterval = probeBusyTimeout
    ) throws -> FMRekeyOutcome {
        guard let first = secrets.first else {
            throw FMDatabaseError.misuse("Rotating the data key needs at least one secret.")
        }
        let slotPath = slotFilePath(forDatabaseAt: path)
        return try KeySlotStorage.withExclusiveLock(forSlotFile: slotPath) {
            let salt = try databaseSalt(path)
            let original = try KeySlotStorage.read(slotPath)
            var opened = try unlock(
                original, secret: first.validated(), slotID: nil, databaseSalt: salt, slotPath: slotPath)
            let oldKey = try opened.settle(databasePath: path, busyTimeout: busyTimeout)
            var file = opened.file
            let oldGeneration = file.body.generation
            var keks: [Int: SecureBytes] = [:]
            for slot in file.body.slots {
                for secret in secrets where keks[slot.id] == nil {
                    if let unlocked = try file.unlock(with: secret.validated(), slotID: slot.id) {
                        keks[slot.id] = unlocked.kek
                    }
                }
            }
            let unmatched = file.body.slots.map(\.id).filter { keks[$0] == nil }
            if !unmatched.isEmpty, !droppingUnmatchedSlots {
                throw FMDatabaseError.misuse(
                    "No given secret opens key slot(s) \(unmatched.map(String.init).joined(separator: ", ")): give "
                        + "their secrets too, or drop them explicitly."
                )
            }
            let newKey = try secureRandomBytes(KeySlotCrypto.dataKeyLength)
            let newGeneration = oldGeneration + 1
            let keys = [oldGeneration: oldKey, newGeneration: newKey]
            // (1) Pending: both keys wrapped in every kept slot.
            file.body.pendingGeneration = newGeneration
            file.body.slots = try file.body.slots.filter { keks[$0.id] != nil }.map { slot in
                guard let kek = keks[slot.id] else {
                    throw FMDatabaseError.misuse("Internal: no key for slot \(slot.id).")
                }
                return try file.rewrap(slot, kek: kek, dataKeys: keys)
            }
            if case .notSynced(let failure) = try KeySlotStorage.writeAtomically(
                file.serialized(dataKeys: keys), to: slotPath)
            {
                // The rekey is durable when it commits; the pending slot file might not be: a power loss could
                // then leave the database under a key no slot file on disk wraps. Not rotated: the database is
                // untouched, and the old slot file goes back (the pending one opens it too, should that fail).
                _ = try? KeySlotStorage.writeAtomically(original, to: slotPath)
                throw FMDatabaseError(
                    code: failure.extendedCode,
                    message:
                        "The data key was not rotated: the pending key slot file could not be made durable "
                        + "(\(failure.message)); the database was not touched and the old data key still opens it."
                )
            }
            // (2) The rekey.
            var outcome: FMRekeyOutcome
            do {
                let db = FMDatabase.internalConnection(path: path)
                db.isKeySlotRotation = true
                guard db.open(withFlags: SQLITE_OPEN_READWRITE) else { throw db.lastError() }
                defer { db.close() }
                try db.setKey(using: RawKeyProvider(key: .raw(secure: oldKey, salt: nil)))
                outcome = try db.rekeySafely(using: RawKeyProvider(key: .raw(secure: newKey, salt: nil)))
            } catch {
                // Which key opens the file decides, as for every rekey. The old slot file goes back only when
                // the old key positively opens the database; when neither could be checked the pending file
                // stays: it wraps both keys, so it opens the database whichever it is under.
                if case .opens = probe(path, key: newKey, busyTimeout: busyTimeout) {
                    outcome = .done
                } else {
                    if case .opens = probe(path, key: oldKey, busyTimeout: busyTimeout) {
                        _ = try? KeySlotStorage.writeAtomically(original, to: slotPath)
                    }
                    throw error
                }
            }
            guard finishing else { return outcome }
            // (3) Only the new key.
            file.body.generation = newGeneration
            file.body.pendingGeneration = nil
            for index in file.body.slots.indices {
                file.body.slots[index].wraps.removeAll { $0.generation != newGeneration }
            }
            do {
                let durability = try KeySlotStorage.writeAtomically(
                    file.serialized(dataKeys: [newGeneration: newKey]), to: slotPath)
                if case .notSynced(let failure) = durability {
                    warn(
                        "The data key was rotated and the key slot file \(slotPath) finished, but its directory could "
                            + "not be synced (\(failure.message)): after a power loss the slot file may be the pending "
                            + "one again (it wraps both keys and opens the database through every kept slot; the next "
                            + "slot change finishes it).")
                }
            } catch {
                // The database is under the new key: the rotation is done. The pending file opens it through
                // every kept slot, and the next slot change finishes it.
                warn(
                    "The data key was rotated, but the key slot file \(slotPath) stays pending (both keys wrapped; it "
                        + "opens the database through every kept slot, and the next slot change finishes it): "
                        + "\((error as NSError).localizedDescription)"
                )
            }
            return outcome
        }
    }

    // MARK: - Engine

    /// A slot file whose data key was unwrapped and whose tag verified.
    struct Opened {
        var file: KeySlotFile
        let slotID: Int
        let dataKeys: [Int: SecureBytes]

        /// The key the database is under, asked of the file itself: during a pending rotation the one of
        /// the two that positively opens the database (never a guess: a lock held past the busy timeout, a
        /// hot journal that cannot be rolled back or an I/O error throws, with the cause); otherwise the
        /// current generation's, checked against the file when `verifying` (escrow, printing).
        /// - Throws: SQLITE_BUSY (or the real cause) when the file could not be checked; SQLITE_NOTADB when
        ///   no data key of the slot file opens it.
        func currentDataKey(
            databasePath: String, verifying: Bool = false,
            busyTimeout: TimeInterval = KeySlots.probeBusyTimeout
        ) throws -> SecureBytes {
            guard let current = dataKeys[file.body.generation] else {
                throw KeySlotFile.corrupt("a generation is missing")
            }
            guard let pending = file.body.pendingGeneration, let next = dataKeys[pending] else {
                guard verifying else { return current }
                let probe = KeySlots.probe(databasePath, key: current, busyTimeout: busyTimeout)
                switch probe {
                case .opens: return current
                case .doesNotOpen:
                    throw FMDatabaseError(
                        code: SQLITE_NOTADB, message: "The data key in the key slot file does not open \(databasePath)."
                    )
                case .locked, .couldNotCheck:
                    throw KeySlots.uncheckedError(databasePath, probe)
                }
            }
            let nextProbe = KeySlots.probe(databasePath, key: next, busyTimeout: busyTimeout)
            if case .opens = nextProbe { return next }
            // Still locked after the whole busy timeout: the other key would only wait as long again.
            if case .locked = nextProbe { throw KeySlots.uncheckedError(databasePath, nextProbe) }
            let currentProbe = KeySlots.probe(databasePath, key: current, busyTimeout: busyTimeout)
            if case .opens = currentProbe { return current }
            if case .doesNotOpen = nextProbe, case .doesNotOpen = currentProbe {
                throw FMDatabaseError(
                    code: SQLITE_NOTADB,
                    message: "Neither data key of the pending rotation in the key slot file opens \(databasePath)."
                )
            }
            // One of the two could not be checked: which key the database is under is not known, so no
            // generation is chosen, dropped or handed out.
            if case .doesNotOpen = currentProbe { throw KeySlots.uncheckedError(databasePath, nextProbe) }
            throw KeySlots.uncheckedError(databasePath, currentProbe)
        }

        /// Finishes a pending rotation in the file (in memory): keeps only the generation whose key
        /// positively opens the database (see `currentDataKey`). Returns its data key.
        mutating func settle(databasePath: String, busyTimeout: TimeInterval = KeySlots.probeBusyTimeout) throws
            -> SecureBytes
        {
            let key = try currentDataKey(databasePath: databasePath, busyTimeout: busyTimeout)
            guard let pending = file.body.pendingGeneration, let next = dataKeys[pending] else { return key }
            let kept = next.isEqual(to: key) ? pending : file.body.generation
            file.body.generation = kept
            file.body.pendingGeneration = nil
            for index in file.body.slots.indices {
                file.body.slots[index].wraps.removeAll { $0.generation != kept }
            }
            return key
        }
    }

    /// Parses `bytes`, checks they belong to the database with `databaseSalt`, unwraps the data key with
    /// `secret` and verifies the whole-file tag.
    static func unlock(_ bytes: Data, secret: KeySlotSecret, slotID: Int?, databaseSalt: Data, slotPath: String) throws
        -> Opened
    {
        let parsed = try KeySlotFile.parse(bytes)
        guard parsed.file.databaseSalt == databaseSalt else {
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message: "The key slot file \(slotPath) belongs to another database (its salt is not this database's)."
            )
        }
        // Trying slots in turn is bounded before any key derivation: a planted file cannot make it slow.
        if slotID == nil { try KeySlotWorkBudget.check(parsed.file, kind: secret.kind, slotPath: slotPath) }
        guard let unlocked = try parsed.file.unlock(with: secret, slotID: slotID) else {
            let what = secret.kind == .rawKey ? "raw key" : secret.kind == .recoveryKey ? "recovery key" : "passphrase"
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message:
                    "No key slot \(slotID.map { "\($0) " } ?? "")in \(slotPath) accepts this \(what) "
                    + "(wrong key, or the slot was altered).",
                marks: [], keySlotFile: slotPath)
        }
        for generation in parsed.file.generations {
            guard let key = unlocked.dataKeys[generation],
                try KeySlotFile.verify(parsed.signed, macs: parsed.macs, generation: generation, dataKey: key)
            else {
                throw KeySlotFile.corrupt("its tag does not verify")
            }
        }
        return Opened(file: parsed.file, slotID: unlocked.slotID, dataKeys: unlocked.dataKeys)
    }

    /// Read-modify-write of the slot file under the lock: unlock with `secret`, settle a pending
    /// rotation, let `change` edit the file, write it atomically. When `revoking` (asked after `change`)
    /// names a secret, the file as written (its bytes, parsed again) must give it no slot.
    @discardableResult
    private static func modify<T>(
        _ path: String, unlockingWith secret: KeySlotSecret, revoking: () -> KeySlotSecret? = { nil },
        _ change: (inout KeySlotFile, [Int: SecureBytes], Int) throws -> T
    ) throws -> T {
        let slotPath = slotFilePath(forDatabaseAt: path)
        return try KeySlotStorage.withExclusiveLock(forSlotFile: slotPath) {
            let salt = try databaseSalt(path)
            var opened = try unlock(
                KeySlotStorage.read(slotPath), secret: secret.validated(), slotID: nil, databaseSalt: salt,
                slotPath: slotPath)
            let key = try opened.settle(databasePath: path)
            var file = opened.file
            let keys = [file.body.generation: key]
            let result = try change(&file, keys, opened.slotID)
            let bytes = try file.serialized(dataKeys: keys)
            let durability = try KeySlotStorage.writeAtomically(bytes, to: slotPath)
            KeySlotStorage.removeStaleTemporaries(of: slotPath)
            removeCreationLeftovers(of: path)
            if let revoked = revoking() {
                // The bytes written, not the path read again: whoever can write the directory could swap
                // another file in meanwhile (the lock is advisory), whose slots would cost key derivations
                // nobody budgeted and decide an error about a change that took.
                let written = try KeySlotFile.parse(bytes).file
                let still = try written.slotIDs(openedBy: revoked)
                guard still.isEmpty else {
                    throw FMDatabaseError(
                        code: SQLITE_ERROR,
                        message:
                            "The revoked secret still opens key slot(s) "
                            + "\(still.map(String.init).joined(separator: ", ")) of the file as written."
                    )
                }
            }
            if case .notSynced(let failure) = durability {
                // The change took (the new file is at the path); only its durability is in doubt.
                warn(
                    "The key slot file \(slotPath) was changed, but its directory could not be synced "
                        + "(\(failure.message)): a power loss may bring the old slot file back until the file system "
                        + "is synced.")
            }
            return result
        }
    }

    /// Refuses `secret` as a new slot's when it already opens a slot: two slots for one secret could not
    /// be revoked one at a time.
    private static func refuseSecretThatOpensASlot(_ secret: KeySlotSecret, in file: KeySlotFile) throws {
        if let id = try file.slotIDs(openedBy: secret).first {
            throw FMDatabaseError.misuse("This secret already opens key slot \(id): a second slot for it is refused.")
        }
    }

    /// The salt in the database's header: the database's identity.
    static func databaseSalt(_ path: String) throws -> Data {
        switch DatabaseFile.kind(atPath: path) {
        case .encrypted(let salt): return salt
        case .missing, .empty: throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "There is no database at \(path).")
        case .directory, .notRegularFile, .unreadable:
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path) is not a readable database file.")
        case .plaintext:
            throw FMDatabaseError(code: SQLITE_NOTADB, message: "\(path) is not encrypted: it has no key slots.")
        case .truncated: throw FMDatabaseError(code: SQLITE_NOTADB, message: "\(path) is too short to be a database.")
        case .encryptedWithPlaintextHeader(let size):
            throw FMDatabaseError(
                code: SQLITE_FORMAT,
                message: "\(path) is encrypted, with a plaintext header of \(size) bytes (as iOS apps in shared "
                    + "containers write): its salt is not in the file, and key slots are bound to that salt.")
        }
    }

    /// How long a check of which data key opens the database waits for other connections' locks.
    static let probeBusyTimeout: TimeInterval = 5

    /// What `key` finds in the database at `path`, asked of the file on a separate connection: read-write,
    /// so a hot journal left by an interrupted commit is rolled back first, as any opener would; waiting up
    /// to `busyTimeout` for other connections' locks. Only SQLITE_NOTADB from reading the schema of a file
    /// that was opened, locked and read is "does not open"; every other error is "could not check".
    /// A copy made with other cipher settings (`export` with a page size) needs them to open: SQLITE_NOTADB
    /// is "does not open" only once every page size SQLCipher allows was tried (raw keys: no KDF, so each
    /// try is one page read).
    static func probe(_ path: String, key: SecureBytes, busyTimeout: TimeInterval = probeBusyTimeout)
        -> Connection.KeyProbe
    {
        var answer = Connection.KeyProbe.couldNotCheck(FMDatabaseError(code: SQLITE_ERROR))
        for pageSize in [nil, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536] as [Int?] {
            answer = probe(path, key: key, pageSize: pageSize, busyTimeout: busyTimeout)
            guard case .doesNotOpen = answer else { return answer }
        }
        return answer
    }

    private static func probe(_ path: String, key: SecureBytes, pageSize: Int?, busyTimeout: TimeInterval)
        -> Connection.KeyProbe
    {
        let db = FMDatabase.internalConnection(path: path)
        db.maxBusyRetryTimeInterval = busyTimeout
        guard db.open(withFlags: SQLITE_OPEN_READWRITE) else {
            return .couldNotCheck((db.lastError() as? FMDatabaseError) ?? FMDatabaseError(code: SQLITE_CANTOPEN))
        }
        defer { db.close() }
        do {
            try db.setKey(
                using: RawKeyProvider(key: .raw(secure: key, salt: nil)), settings: CipherSettings(pageSize: pageSize))
            return .opens
        } catch let error as FMDatabaseError {
            return Connection.classify(error)
        } catch {
            return .couldNotCheck(FMDatabaseError(code: SQLITE_ERROR, message: "\(error)"))
        }
    }

    /// The error for a database whose key could not be checked: its cause (SQLITE_BUSY for a lock).
    static func uncheckedError(_ path: String, _ probe: Connection.KeyProbe) -> FMDatabaseError {
        let cause = probe.verdict.error ?? FMDatabaseError(code: SQLITE_ERROR)
        return FMDatabaseError(
            code: cause.extendedCode,
            message:
                "Could not check which data key \(path) is under (\(cause.message)); nothing was changed or handed "
                + "out: try again when the database is not locked and can be read."
        )
    }

    private static func nextID(_ file: KeySlotFile) -> Int {
        (file.body.slots.map(\.id).max() ?? 0) + 1
    }

    static func info(_ slot: KeySlotFile.Slot) -> KeySlotInfo {
        let kdf: String
        switch slot.kdf.name {
        case "scrypt": kdf = "scrypt N=\(slot.kdf.n ?? 0) r=\(slot.kdf.r ?? 0) p=\(slot.kdf.p ?? 0)"
        case "pbkdf2-sha512": kdf = "pbkdf2-sha512 \(slot.kdf.iterations ?? 0)"
        default: kdf = slot.kdf.name
        }
        return KeySlotInfo(
            id: slot.id, kind: KeySlotKind(rawValue: slot.kind) ?? .passphrase,
            created: Date(timeIntervalSince1970: TimeInterval(slot.created)), kdf: kdf
        )
    }
}
