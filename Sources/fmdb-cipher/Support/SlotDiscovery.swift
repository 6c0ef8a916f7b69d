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
///
/// What a planted slot file can cost is bounded: a slot file group or others can change, or owned by someone
/// other than root, this user or the database's owner, is not used (the library writes slot files 0600, as
/// their writer); the library refuses to try in turn slots whose key derivations together exceed its budget
/// (`FMDatabaseError.exceedsKeySlotWorkBudget`), before any is tried; and no slot is unlocked twice in one open.
enum SlotDiscovery {
    /// Whether `path` has a key slot file beside it (lstat: a link is "something there" too).
    static func hasSlotFile(_ path: String) -> Bool {
        var status = stat()
        return lstat(KeySlots.slotFilePath(forDatabaseAt: path), &status) == 0
    }

    /// Why the slot file beside `database` is not used (nil: it may be): group or others can change it, or it
    /// is owned by someone other than root, this user or the database's owner. The library writes every slot
    /// file 0600, owned by its writer, so neither happens to a slot file it made; the key files the tool reads
    /// are refused on the same mode rule. Anything else (missing, not a regular file) is the library's to say.
    static func distrust(_ database: String) -> String? {
        var slot = stat()
        guard lstat(KeySlots.slotFilePath(forDatabaseAt: database), &slot) == 0 else { return nil }
        return distrust(slot, of: database)
    }

    /// `distrust` of the slot file whose `lstat` is `slot`.
    private static func distrust(_ slot: stat, of database: String) -> String? {
        guard (slot.st_mode & S_IFMT) == S_IFREG else { return nil }
        if slot.st_mode & 0o022 != 0 {
            return
                "it has mode 0\(String(slot.st_mode & 0o7777, radix: 8)): group or others can change it (chmod 600 it)"
        }
        var owner = stat()
        let databaseOwner = stat(database, &owner) == 0 ? owner.st_uid : nil
        guard slot.st_uid == 0 || slot.st_uid == geteuid() || slot.st_uid == databaseOwner else {
            return "it is owned by user id \(slot.st_uid): not root, this user or the database's owner"
        }
        return nil
    }

    /// Why the slot file beside `database` cannot be used to open it, and the error that says so (nil: it may
    /// be): not a regular file (a FIFO, a link, a directory: exit 66, and never opened, so nothing blocks), a
    /// file `distrust` names (66), or one the library cannot read or parse (its own exit code: damaged is 2).
    static func unusable(_ database: String) -> (reason: String, error: CLIError)? {
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        var slot = stat()
        guard lstat(slotFile, &slot) == 0 else { return nil }
        let reason: String
        if (slot.st_mode & S_IFMT) != S_IFREG {
            reason = "it is not a regular file"
        } else if let distrust = distrust(slot, of: database) {
            reason = distrust
        } else {
            do {
                _ = try KeySlots.list(forDatabaseAt: database)
                return nil
            } catch {
                let failure = CLIError.from(error, context: slotFile)
                return ("it cannot be read: \(failure.message)", failure)
            }
        }
        return (reason, CLIError("the key slot file \(slotFile) is not used: \(reason)", code: Exit.noInput))
    }

    /// Refuses (exit 66) a slot file `distrust` names, for an open that can only go through it.
    static func requireTrusted(_ database: String) throws {
        if let reason = distrust(database) {
            throw CLIError(
                "the key slot file \(KeySlots.slotFilePath(forDatabaseAt: database)) is not used: \(reason)",
                code: Exit.noInput)
        }
    }

    /// The slot kinds `material` could open in `slots`, in the order they are tried.
    private static func candidates(_ material: KeyMaterial, _ slots: [KeySlotInfo]) -> [(KDF, KeySlotSecret)] {
        let kinds = Set(slots.map(\.kind))
        var candidates: [(KDF, KeySlotSecret)] = []
        if kinds.contains(.passphrase) { candidates.append((.slot, .passphrase(material: material))) }
        if kinds.contains(.rawKey), let raw = try? KeySlotSecret.rawKey(material: material) {
            candidates.append((.slotRaw, raw))
        }
        if kinds.contains(.recoveryKey), let recovery = try? KeySlotSecret.recoveryKey(material: material) {
            candidates.append((.slotRecovery, recovery))
        }
        return candidates
    }

    /// The slot kind of `material` on `database`: `.slot`, `.slotRaw` or `.slotRecovery`. With several kinds
    /// possible each is unlocked in turn; when none accepts the secret this throws the wrong key (or the
    /// work budget) at once, rather than letting the command unlock every slot again to find it out.
    static func kind(of material: KeyMaterial, on database: String) throws -> KDF {
        // A damaged slot file: opening through a slot says how (exit 2), which is the truth.
        guard let slots = try? KeySlots.list(forDatabaseAt: database) else { return .slot }
        let candidates = candidates(material, slots)
        // None possible: as a passphrase, which no slot accepts (wrong key, exit 65).
        guard candidates.count > 1 else { return candidates.first?.0 ?? .slot }
        switch inTurn(candidates, database) {
        case .opened(let kdf, _)?: return kdf
        case .refused(let error)?: throw error
        case nil: throw FMDatabaseError(code: SQLITE_NOTADB)
        }
    }

    /// What trying a database's slots found.
    enum Outcome {
        /// A slot accepted the secret: its kind, and the provider that unlocked it (it keeps the key it
        /// derived, so the open that follows derives nothing again).
        case opened(kdf: KDF, provider: any KeyProvider)
        /// No slot accepts the secret (or none could be tried: over the budget, or the file not used); the
        /// error to report when the secret does not open the database otherwise either.
        case refused(Error)
    }

    /// Tries `material` on the slots of `database`, each possible kind in turn. A slot file that cannot be read
    /// (callers check `unusable` first; it may change since) counts as opened: the open through a slot says why.
    static func unlocking(_ material: KeyMaterial, on database: String) -> Outcome {
        guard let slots = try? KeySlots.list(forDatabaseAt: database) else {
            return .opened(
                kdf: .slot, provider: KeySlotKeyProvider(secret: .passphrase(material: material), logsRefusals: false))
        }
        if let outcome = inTurn(candidates(material, slots), database) { return outcome }
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        return .refused(
            CLIError(
                "\(database): wrong key: no key slot in \(slotFile) accepts it (SQLITE_NOTADB)", code: Exit.wrongKey))
    }

    /// Unlocks the `candidates` in turn: the first that opens, else the refusal to report (nil when there was
    /// no candidate to try). Over the budget for one kind, the others (raw and recovery keys, an HMAC each) are
    /// still tried.
    private static func inTurn(_ candidates: [(KDF, KeySlotSecret)], _ database: String) -> Outcome? {
        var refusal: Error?
        for (kdf, secret) in candidates {
            let provider = KeySlotKeyProvider(secret: secret, logsRefusals: false)
            switch unlock(provider, database) {
            case .opened: return .opened(kdf: kdf, provider: provider)
            case .refused(let error): refusal = refusal.map { Self.preferred($0, error) } ?? error
            }
        }
        return refusal.map(Outcome.refused)
    }

    /// Of two refusals, the one to report: the work budget (the operator must act) before a wrong key.
    private static func preferred(_ first: Error, _ second: Error) -> Error {
        (second as? FMDatabaseError)?.exceedsKeySlotWorkBudget == true ? second : first
    }

    private enum Attempt {
        case opened
        case refused(Error)
    }

    /// Whether some slot of `database` accepts `provider`'s secret. An error other than "no slot accepts it"
    /// or the work budget counts as opened: the open that follows reports it.
    private static func unlock(_ provider: KeySlotKeyProvider, _ database: String) -> Attempt {
        // The salt through the library's header read (never an open and close of the file by this process,
        // which would drop the POSIX locks its connections hold on it).
        guard case .encrypted(let salt) = FileKind(path: database) else { return .opened }
        do {
            _ = try provider.key(for: KeyRequest(databasePath: database, salt: salt))
            return .opened
        } catch let error as FMDatabaseError
            where FMResultCode.notADatabase ~= error || error.exceedsKeySlotWorkBudget
        {
            return .refused(error)
        } catch {
            return .opened
        }
    }

    /// The provider of slot `id` of `database` only (`--slot ID`): one key derivation, whatever the other slots
    /// cost. The kind is `kdf` when it names one, else the slot's own.
    static func opening(slot id: Int, kdf: KDF, _ database: String, with material: KeyMaterial) throws -> (
        kdf: KDF, provider: any KeyProvider
    ) {
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        guard hasSlotFile(database) else {
            throw CLIError.usage("--slot: \(database) has no key slot file (\(slotFile))")
        }
        try requireTrusted(database)
        let slots: [KeySlotInfo]
        do {
            slots = try KeySlots.list(forDatabaseAt: database)
        } catch {
            throw CLIError.from(error, context: database)
        }
        guard let slot = slots.first(where: { $0.id == id }) else {
            throw CLIError.usage("--slot: \(slotFile) has no slot \(id) (fmdb-cipher keys list shows the ids)")
        }
        let kind: KDF
        if kdf.opensSlot {
            kind = kdf
        } else {
            switch slot.kind {
            case .passphrase: kind = .slot
            case .rawKey: kind = .slotRaw
            case .recoveryKey: kind = .slotRecovery
            }
        }
        return (kind, KeySlotKeyProvider(secret: try kind.slotSecret(material), slotID: id, logsRefusals: false))
    }
}

extension KeyOptions {
    /// How `material` opens the existing database at `database`, and its provider: as `--kdf` says (through
    /// slot `--slot` only, when given), except that an encrypted database with a key slot file beside it, given
    /// no `--kdf` (or `--kdf passphrase`, which cannot open a slotted database), is opened through its slots
    /// (`SlotDiscovery`). When no slot accepts the secret (or the slot file is not used, is not a regular file,
    /// cannot be read or parsed, or its slots together exceed the library's work budget) it is tried as a
    /// passphrase (`--kdf`'s default) with the settings given; if that opens the file, the slot file does not
    /// belong to it, which a warning says. If that try fails for another reason than a wrong key (the database
    /// locked, an I/O error), that is the error. Otherwise the slots' answer is: a wrong key (exit 65), the work
    /// budget (exit 64), a slot file not used (66) or damaged (2).
    func opening(_ database: String, with material: KeyMaterial) throws -> (kdf: KDF, provider: any KeyProvider) {
        if let slotID { return try SlotDiscovery.opening(slot: slotID, kdf: kdf, database, with: material) }
        guard FileKind(path: database).isEncrypted, SlotDiscovery.hasSlotFile(database) else {
            return (kdf, try kdf.provider(material))
        }
        if kdf.opensSlot { try SlotDiscovery.requireTrusted(database) }
        guard kdf == .passphrase else { return (kdf, try kdf.provider(material)) }
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        let unusable = SlotDiscovery.unusable(database)
        let refusal: Error
        if let unusable {
            refusal = unusable.error
        } else {
            switch SlotDiscovery.unlocking(material, on: database) {
            case .opened(let kdf, let provider): return (kdf, provider)
            case .refused(let error): refusal = error
            }
        }
        let passphrase = PassphraseKeyProvider(material: material)
        let db: FMDatabase
        do {
            db = try DatabaseFiles.open(database, provider: passphrase, settings: settings, readOnly: true)
        } catch {
            // Not a wrong key (locked, an I/O error, ...): that is the answer, not the slots' refusal.
            let failure = CLIError.from(error, context: database)
            guard failure.code == Exit.wrongKey else { throw failure }
            throw CLIError.from(refusal, context: database)
        }
        db.close()
        let why =
            if let unusable {
                "the key slot file \(slotFile) is not used (\(unusable.reason))"
            } else if (refusal as? FMDatabaseError)?.exceedsKeySlotWorkBudget == true {
                "the key slots in \(slotFile) were not tried (their key derivations together exceed the budget)"
            } else {
                "no key slot in \(slotFile) accepts the key"
            }
        Output.message(
            "fmdb-cipher: warning: \(why), but it opens \(database) as a passphrase: that slot file does not "
                + "belong to \(database) (move it away)")
        return (.passphrase, passphrase)
    }

    /// The kind of slot key `material` is on the slotted `database`, for a command that only ever unlocks a slot
    /// (`rekey --data-key`): as `--kdf` says, else found from the slot kinds present; never a passphrase fallback.
    func slotKind(opening database: String, with material: KeyMaterial) throws -> KDF {
        try SlotDiscovery.requireTrusted(database)
        guard kdf == .passphrase, FileKind(path: database).isEncrypted, SlotDiscovery.hasSlotFile(database) else {
            return kdf
        }
        return try SlotDiscovery.kind(of: material, on: database)
    }

    /// The provider of `material` for the existing database at `database` (see `opening(_:with:)`).
    func provider(opening database: String, with material: KeyMaterial) throws -> any KeyProvider {
        try opening(database, with: material).provider
    }
}
