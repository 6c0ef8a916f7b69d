import FMDB
import Foundation

/// How a key opens a database that has a key slot file beside it (`<db>-keyslots`): through its slots,
/// without `--kdf slot`. The secret is tried as a passphrase, a raw key and a recovery key, in that order,
/// against the slot kinds the file holds (read without a key); a kind the secret cannot be (a raw key is 32
/// bytes or 64 hexadecimal digits, a recovery key has its own checked format) is not tried. When more than
/// one kind is possible, each is unlocked in turn (one key derivation each) and the first slot that accepts
/// the secret decides. When no slot accepts it, `KeyOptions` tries it as the plain key of `--kdf`'s default (a
/// passphrase) before calling it wrong: a stray or planted slot file beside a single-key database must not make
/// its right key fail.
enum SlotDiscovery {
    /// Whether `path` has a key slot file beside it (lstat: a link is "something there" too).
    static func hasSlotFile(_ path: String) -> Bool {
        var status = stat()
        return lstat(KeySlots.slotFilePath(forDatabaseAt: path), &status) == 0
    }

    /// The slot kind of `material` on `database`: `.slot`, `.slotRaw` or `.slotRecovery`.
    static func kind(of material: KeyMaterial, on database: String) -> KDF {
        // A damaged slot file: opening through a slot says how (exit 2), which is the truth.
        guard let slots = try? KeySlots.list(forDatabaseAt: database) else { return .slot }
        let kinds = Set(slots.map(\.kind))
        var candidates: [(KDF, KeySlotSecret)] = []
        if kinds.contains(.passphrase) { candidates.append((.slot, .passphrase(material: material))) }
        if kinds.contains(.rawKey), let raw = try? KeySlotSecret.rawKey(material: material) {
            candidates.append((.slotRaw, raw))
        }
        if kinds.contains(.recoveryKey), let recovery = try? KeySlotSecret.recoveryKey(material: material) {
            candidates.append((.slotRecovery, recovery))
        }
        // None possible: as a passphrase, which no slot accepts (wrong key, exit 65).
        guard candidates.count > 1 else { return candidates.first?.0 ?? .slot }
        for (kdf, secret) in candidates where unlocks(secret, database) { return kdf }
        return candidates[0].0
    }

    /// The first slot kind of `database` whose slot accepts `material`, with the provider that unlocked it (it
    /// keeps the key it derived, so the open that follows derives nothing again); nil when no slot accepts it.
    /// A slot file that cannot be read counts as accepting: the open through a slot says why (exit 2).
    static func unlocking(_ material: KeyMaterial, on database: String) -> (kdf: KDF, provider: any KeyProvider)? {
        guard let slots = try? KeySlots.list(forDatabaseAt: database) else {
            return (.slot, KeySlotKeyProvider(secret: .passphrase(material: material)))
        }
        let kinds = Set(slots.map(\.kind))
        var candidates: [(KDF, KeySlotSecret)] = []
        if kinds.contains(.passphrase) { candidates.append((.slot, .passphrase(material: material))) }
        if kinds.contains(.rawKey), let raw = try? KeySlotSecret.rawKey(material: material) {
            candidates.append((.slotRaw, raw))
        }
        if kinds.contains(.recoveryKey), let recovery = try? KeySlotSecret.recoveryKey(material: material) {
            candidates.append((.slotRecovery, recovery))
        }
        for (kdf, secret) in candidates {
            let provider = KeySlotKeyProvider(secret: secret)
            if unlocks(provider, database) { return (kdf, provider) }
        }
        return nil
    }

    /// Whether some slot of `database` accepts `secret`. An error other than "no slot accepts it" counts as
    /// yes: the open that follows reports it.
    private static func unlocks(_ secret: KeySlotSecret, _ database: String) -> Bool {
        unlocks(KeySlotKeyProvider(secret: secret), database)
    }

    private static func unlocks(_ provider: KeySlotKeyProvider, _ database: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: database) else { return true }
        defer { try? handle.close() }
        guard let salt = try? handle.read(upToCount: 16), salt.count == 16 else { return true }
        do {
            _ = try provider.key(for: KeyRequest(databasePath: database, salt: salt))
            return true
        } catch {
            return !(FMResultCode.notADatabase ~= error)
        }
    }
}

extension KeyOptions {
    /// How `material` opens the existing database at `database`, and its provider: as `--kdf` says, except
    /// that an encrypted database with a key slot file beside it, given no `--kdf` (or `--kdf passphrase`,
    /// which cannot open a slotted database), is opened through its slots (`SlotDiscovery`). When no slot
    /// accepts the secret it is tried as a passphrase (`--kdf`'s default) with the settings given; if that
    /// opens the file, the slot file does not belong to it, which a warning says. Otherwise the slots decide
    /// (a wrong key, exit 65).
    func opening(_ database: String, with material: KeyMaterial) throws -> (kdf: KDF, provider: any KeyProvider) {
        guard kdf == .passphrase, FileKind(path: database).isEncrypted, SlotDiscovery.hasSlotFile(database) else {
            return (kdf, try kdf.provider(material))
        }
        if let found = SlotDiscovery.unlocking(material, on: database) { return found }
        let passphrase = PassphraseKeyProvider(material: material)
        if let db = try? DatabaseFiles.open(database, provider: passphrase, settings: settings, readOnly: true) {
            db.close()
            Output.message(
                "fmdb-cipher: warning: no key slot in \(KeySlots.slotFilePath(forDatabaseAt: database)) accepts the "
                    + "key, but it opens \(database) as a passphrase: that slot file does not belong to \(database) "
                    + "(move it away)")
            return (.passphrase, passphrase)
        }
        let kind = SlotDiscovery.kind(of: material, on: database)
        return (kind, try kind.provider(material))
    }

    /// The kind of slot key `material` is on the slotted `database`, for a command that only ever unlocks a slot
    /// (`rekey --data-key`): as `--kdf` says, else found from the slot kinds present; never a passphrase fallback.
    func slotKind(opening database: String, with material: KeyMaterial) -> KDF {
        guard kdf == .passphrase, FileKind(path: database).isEncrypted, SlotDiscovery.hasSlotFile(database) else {
            return kdf
        }
        return SlotDiscovery.kind(of: material, on: database)
    }

    /// The provider of `material` for the existing database at `database` (see `opening(_:with:)`).
    func provider(opening database: String, with material: KeyMaterial) throws -> any KeyProvider {
        try opening(database, with: material).provider
    }
}
