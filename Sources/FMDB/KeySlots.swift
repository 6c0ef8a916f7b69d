import CSQLCipher
import Foundation

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
    /// The database file is created by the library with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600 (whatever
    /// the umask) before SQLite opens it: nothing may be at `path` beforehand, not even a symbolic link.
    /// - Throws: `FMDatabaseError`: SQLITE_CANTOPEN when anything (a file, even empty, or a link, even
    ///   dangling) is at the database's path or its slot file's, or it cannot be created; SQLITE_MISUSE
    ///   for KDF parameters below the floor.
    @discardableResult
    public static func createDatabase(at path: String, secret: KeySlotSecret, kdf: KeySlotKDF = .default) throws -> KeySlotInfo {
        let secret = try secret.validated()
        guard secret.kind != .recoveryKey else {
            throw FMDatabaseError.misuse("Recovery keys are generated, not given: create with a passphrase or raw key, then addRecoverySlot.")
        }
        if secret.kind == .passphrase { try kdf.validate() }
        let slotPath = slotFilePath(forDatabaseAt: path)
        return try KeySlotStorage.withExclusiveLock(forSlotFile: slotPath) {
            var existing = stat()
            // lstat: nothing at all may be there, not even a dangling symbolic link (SQLite would follow it).
            guard lstat(path, &existing) != 0, errno == ENOENT else {
                throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path) already exists: key slots are set up on a new database.")
            }
            guard lstat(slotPath, &existing) != 0, errno == ENOENT else {
                throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "The key slot file \(slotPath) already exists.")
            }
            let dataKey = try secureRandomBytes(KeySlotCrypto.dataKeyLength)
            let salt = try secureRandomBytes(16)
            // The library makes the file itself, private whatever the umask and never through a link;
            // SQLite then opens that file (and makes its journal with the same mode).
            let created = try createPrivateFile(path)
            defer { close(created.fd) }
            let db = FMDatabase(path: path)
            db.logsErrors = false
            do {
                guard db.open(withFlags: SQLITE_OPEN_READWRITE) else { throw db.lastError() }
                try db.setKey(using: RawKeyProvider(key: .raw(secure: dataKey, salt: salt)))
                db.close()
                // What SQLite wrote must be the file made above, not something swapped in at the path meanwhile.
                var now = stat()
                guard lstat(path, &now) == 0, (now.st_mode & S_IFMT) == S_IFREG,
                      now.st_dev == created.info.st_dev, now.st_ino == created.info.st_ino else {
                    throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path) was replaced while the database was being created.")
                }
                let saltData = salt.withUnsafeBytes { Data($0) }
                guard DatabaseFile.kind(atPath: path) == .encrypted(salt: saltData) else {
                    throw FMDatabaseError(code: SQLITE_ERROR, message: "The new database's header does not hold the salt it was created with.")
                }
                var file = KeySlotFile(body: .init(version: KeySlotFile.version, databaseSalt: saltData.hexString,
                                                   generation: 1, pendingGeneration: nil, slots: []))
                let slot = try file.makeSlot(id: 1, secret: secret, kdf: kdf, dataKeys: [1: dataKey])
                file.body.slots = [slot]
                try KeySlotStorage.writeAtomically(try file.serialized(dataKeys: [1: dataKey]), to: slotPath)
                return info(slot)
            } catch {
                db.close()
                // Only the file made above is removed, not whatever may have been swapped in at the path.
                var now = stat()
                if lstat(path, &now) == 0, now.st_dev == created.info.st_dev, now.st_ino == created.info.st_ino { unlink(path) }
                throw error
            }
        }
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
    /// for slot in try KeySlots.list(path) { print(slot) }   // "1 passphrase scrypt N=32768 r=8 p=1 ..."
    /// ```
    /// - Throws: `FMDatabaseError` (SQLITE_CANTOPEN missing, SQLITE_CORRUPT damaged).
    public static func list(_ path: String) throws -> [KeySlotInfo] {
        let parsed = try KeySlotFile.parse(KeySlotStorage.read(slotFilePath(forDatabaseAt: path)))
        return parsed.file.body.slots.map(info)
    }

    /// Adds a slot for `newSecret`, after unlocking the data key with `secret` (any existing slot).
    ///
    /// ```swift
    /// try KeySlots.addSlot(to: path, unlockingWith: .passphrase("admin"), newSecret: .passphrase("service"))
    /// ```
    /// - Returns: the new slot.
    /// - Throws: `FMDatabaseError` (SQLITE_NOTADB when no slot accepts `secret`; see `KeySlotKeyProvider`).
    @discardableResult
    public static func addSlot(
        to path: String, unlockingWith secret: KeySlotSecret, newSecret: KeySlotSecret, kdf: KeySlotKDF = .default
    ) throws -> KeySlotInfo {
        let newSecret = try newSecret.validated()
        guard newSecret.kind != .recoveryKey else {
            throw FMDatabaseError.misuse("Recovery keys are generated, not given: use addRecoverySlot.")
        }
        return try modify(path, unlockingWith: secret) { file, keys, _ in
            let slot = try file.makeSlot(id: nextID(file), secret: newSecret, kdf: kdf, dataKeys: keys)
            file.body.slots.append(slot)
            return info(slot)
        }
    }

    /// Adds a slot for a freshly generated recovery key, which is returned to be shown once.
    ///
    /// ```swift
    /// let (slot, recovery) = try KeySlots.addRecoverySlot(to: path, unlockingWith: .passphrase("admin"))
    /// print("Recovery key (slot \(slot.id)): \(recovery.formattedText)")
    /// ```
    public static func addRecoverySlot(to path: String, unlockingWith secret: KeySlotSecret) throws -> (slot: KeySlotInfo, key: RecoveryKey) {
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
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE: no such slot, or the last one).
    public static func removeSlot(_ id: Int, from path: String, unlockingWith secret: KeySlotSecret) throws {
        try modify(path, unlockingWith: secret) { file, _, _ in
            guard file.body.slots.contains(where: { $0.id == id }) else {
                throw FMDatabaseError.misuse("There is no key slot \(id).")
            }
            guard file.body.slots.count > 1 else {
                throw FMDatabaseError.misuse("Slot \(id) is the last key slot: removing it would make the database unreadable.")
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
    /// - Note: someone who kept a copy of the old slot file and knows the old secret can still unwrap
    ///   the data key from that copy. Use `rotateDataKey` when that matters.
    @discardableResult
    public static func changeSlot(of path: String, from old: KeySlotSecret, to new: KeySlotSecret, kdf: KeySlotKDF = .default) throws -> KeySlotInfo {
        let new = try new.validated()
        guard new.kind != .recoveryKey else {
            throw FMDatabaseError.misuse("Recovery keys are generated, not given: use addRecoverySlot, then removeSlot.")
        }
        return try modify(path, unlockingWith: old) { file, keys, unlockedID in
            guard let index = file.body.slots.firstIndex(where: { $0.id == unlockedID }) else {
                throw FMDatabaseError.misuse("Internal: the unlocked slot vanished.")
            }
            let slot = try file.makeSlot(id: unlockedID, secret: new, kdf: kdf, dataKeys: keys)
            file.body.slots[index] = slot
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
        let opened = try unlock(KeySlotStorage.read(slotPath), secret: secret.validated(), slotID: nil, databaseSalt: salt, slotPath: slotPath)
        let key = try opened.currentDataKey(databasePath: path)
        return try key.lowercaseHex().withUnsafeBytes(body)
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
    /// - Throws: `FMDatabaseError`; SQLITE_BUSY when another connection holds the database (the old key
    ///   and slot file then stay in force).
    public static func rotateDataKey(of path: String, secrets: [KeySlotSecret], droppingUnmatchedSlots: Bool = false) throws {
        guard let first = secrets.first else { throw FMDatabaseError.misuse("Rotating the data key needs at least one secret.") }
        let slotPath = slotFilePath(forDatabaseAt: path)
        try KeySlotStorage.withExclusiveLock(forSlotFile: slotPath) {
            let salt = try databaseSalt(path)
            let original = try KeySlotStorage.read(slotPath)
            var opened = try unlock(original, secret: first.validated(), slotID: nil, databaseSalt: salt, slotPath: slotPath)
            let oldKey = try opened.settle(databasePath: path)
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
                    "No given secret opens key slot(s) \(unmatched.map(String.init).joined(separator: ", ")): give their "
                        + "secrets too, or drop them explicitly."
                )
            }
            let newKey = try secureRandomBytes(KeySlotCrypto.dataKeyLength)
            let newGeneration = oldGeneration + 1
            let keys = [oldGeneration: oldKey, newGeneration: newKey]
            // (1) Pending: both keys wrapped in every kept slot.
            file.body.pendingGeneration = newGeneration
            file.body.slots = try file.body.slots.filter { keks[$0.id] != nil }.map { slot in
                guard let kek = keks[slot.id] else { throw FMDatabaseError.misuse("Internal: no key for slot \(slot.id).") }
                return try file.rewrap(slot, kek: kek, dataKeys: keys)
            }
            try KeySlotStorage.writeAtomically(file.serialized(dataKeys: keys), to: slotPath)
            // (2) The rekey.
            do {
                let db = FMDatabase(path: path)
                db.logsErrors = false
                let flags = SQLITE_OPEN_READWRITE
                guard db.open(withFlags: flags) else { throw db.lastError() }
                defer { db.close() }
                try db.setKey(using: RawKeyProvider(key: .raw(secure: oldKey, salt: nil)))
                // .checkpointPending is still a changed key: the WAL is finished by the last connection to close.
                _ = try db.rekeySafely(using: RawKeyProvider(key: .raw(secure: newKey, salt: nil)))
            } catch {
                // The database is still under the old key: put the old slot file back.
                if !probe(path, key: newKey) { try? KeySlotStorage.writeAtomically(original, to: slotPath) }
                throw error
            }
            // (3) Only the new key.
            file.body.generation = newGeneration
            file.body.pendingGeneration = nil
            for index in file.body.slots.indices {
                file.body.slots[index].wraps.removeAll { $0.generation != newGeneration }
            }
            try KeySlotStorage.writeAtomically(file.serialized(dataKeys: [newGeneration: newKey]), to: slotPath)
        }
    }

    // MARK: - Engine

    /// A slot file whose data key was unwrapped and whose tag verified.
    struct Opened {
        var file: KeySlotFile
        let slotID: Int
        let dataKeys: [Int: SecureBytes]

        /// The key the database is under: the current generation's, or during a pending rotation
        /// whichever of the two opens the database.
        func currentDataKey(databasePath: String) throws -> SecureBytes {
            guard let current = dataKeys[file.body.generation] else { throw KeySlotFile.corrupt("a generation is missing") }
            guard let pending = file.body.pendingGeneration, let next = dataKeys[pending] else { return current }
            return KeySlots.probe(databasePath, key: next) ? next : current
        }

        /// Finishes a pending rotation in the file (in memory): keeps only the generation the database
        /// is under. Returns its data key.
        mutating func settle(databasePath: String) throws -> SecureBytes {
            let key = try currentDataKey(databasePath: databasePath)
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
    static func unlock(_ bytes: Data, secret: KeySlotSecret, slotID: Int?, databaseSalt: Data, slotPath: String) throws -> Opened {
        let parsed = try KeySlotFile.parse(bytes)
        guard parsed.file.databaseSalt == databaseSalt else {
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message: "The key slot file \(slotPath) belongs to another database (its salt is not this database's)."
            )
        }
        guard let unlocked = try parsed.file.unlock(with: secret, slotID: slotID) else {
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message: "No key slot accepts this \(secret.kind == .rawKey ? "raw key" : secret.kind == .recoveryKey ? "recovery key" : "passphrase") "
                    + "(wrong key, or the slot was altered)."
            )
        }
        for generation in parsed.file.generations {
            guard let key = unlocked.dataKeys[generation],
                  try KeySlotFile.verify(parsed.signed, macs: parsed.macs, generation: generation, dataKey: key) else {
                throw KeySlotFile.corrupt("its tag does not verify")
            }
        }
        return Opened(file: parsed.file, slotID: unlocked.slotID, dataKeys: unlocked.dataKeys)
    }

    /// Read-modify-write of the slot file under the lock: unlock with `secret`, settle a pending
    /// rotation, let `change` edit the file, write it atomically.
    @discardableResult
    private static func modify<T>(
        _ path: String, unlockingWith secret: KeySlotSecret,
        _ change: (inout KeySlotFile, [Int: SecureBytes], Int) throws -> T
    ) throws -> T {
        let slotPath = slotFilePath(forDatabaseAt: path)
        return try KeySlotStorage.withExclusiveLock(forSlotFile: slotPath) {
            let salt = try databaseSalt(path)
            var opened = try unlock(KeySlotStorage.read(slotPath), secret: secret.validated(), slotID: nil, databaseSalt: salt, slotPath: slotPath)
            let key = try opened.settle(databasePath: path)
            var file = opened.file
            let keys = [file.body.generation: key]
            let result = try change(&file, keys, opened.slotID)
            try KeySlotStorage.writeAtomically(file.serialized(dataKeys: keys), to: slotPath)
            KeySlotStorage.removeStaleTemporaries(of: slotPath)
            return result
        }
    }

    /// The salt in the database's header: the database's identity.
    static func databaseSalt(_ path: String) throws -> Data {
        switch DatabaseFile.kind(atPath: path) {
        case .encrypted(let salt): return salt
        case .missing, .empty: throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "There is no database at \(path).")
        case .directory, .notRegularFile, .unreadable:
            throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "\(path) is not a readable database file.")
        case .plaintext: throw FMDatabaseError(code: SQLITE_NOTADB, message: "\(path) is not encrypted: it has no key slots.")
        case .truncated: throw FMDatabaseError(code: SQLITE_NOTADB, message: "\(path) is too short to be a database.")
        }
    }

    /// Whether `key` opens the database at `path` (read-only connection).
    static func probe(_ path: String, key: SecureBytes) -> Bool {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open(withFlags: SQLITE_OPEN_READONLY) else { return false }
        defer { db.close() }
        return (try? db.setKey(using: RawKeyProvider(key: .raw(secure: key, salt: nil)))) != nil
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

extension SecureBytes {
    /// Lower-case hexadecimal digits, in secure storage.
    func lowercaseHex() -> SecureBytes {
        SecureBytes(count: 2 * count) { out in
            let digits: StaticString = "0123456789abcdef"
            digits.withUTF8Buffer { hex in
                withUnsafeBytes { bytes in
                    for (index, byte) in bytes.enumerated() {
                        out[2 * index] = hex[Int(byte >> 4)]
                        out[2 * index + 1] = hex[Int(byte & 0x0F)]
                    }
                }
            }
        }
    }
}
