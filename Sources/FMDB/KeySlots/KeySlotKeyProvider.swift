import Foundation
import Logging

/// Opens a slotted database (see `KeySlots`) with one of its secrets: reads the slot file beside the
/// database, unwraps the data key from the slot the secret opens, and hands SQLCipher the raw data
/// key. The key derivation runs once: a pool of 8 connections costs one, and so does a service that runs
/// for weeks while operators change, add and remove slots.
///
/// Once it has unlocked the data key, the provider keeps it (in wiped memory) for its lifetime: when the
/// slot file changes, the key it holds is checked against the database (a raw-key open, no key
/// derivation) and kept while it opens it, even when this provider's own secret was changed or its slot
/// removed, the way an unlocked volume stays unlocked after a passphrase change. A new process needs a
/// secret the slot file accepts now. Only a data-key rotation (`KeySlots.rotateDataKey`) makes it unlock
/// the slot file again, with its secret. When no slot of a slot file accepts the secret (its slot was
/// changed or dropped, then the data key rotated), the provider remembers that answer for those file contents:
/// later connections fail at once, with no key derivation, until the slot file changes: its first change is tried at
/// once, a slot file that keeps changing at most once per ``refusalRetryInterval``. The first refusal is logged once,
/// at warning level on the "fmdb" logger (the slot file and why; never a secret).
///
/// ```swift
/// let provider = KeySlotKeyProvider(secret: .passphrase("correct horse battery staple"))
/// let pool = try FMDatabasePool(path: path, keyProvider: provider)
/// ```
///
/// A database that does not exist yet (or an empty file) is created under the identity of the slot file
/// beside it only by a provider asked to create that very path (``creatingDatabase(at:)``): it answers
/// with the data key and the slot file's salt, which SQLCipher writes into the new header. That is how a
/// copy keeps its slots (`KeySlots.copySlotFile`) and how `KeySlots.createSlotFile` makes a slotted
/// database from other contents. Any other provider refuses (SQLITE_CANTOPEN): a slot file found beside a
/// missing or empty database may have been put there by anyone who holds a slot of the database it came
/// from, and would make a new database they can read.
///
/// Errors: no slot file (SQLITE_CANTOPEN); a file damaged, altered, truncated or of another database
/// (SQLITE_CORRUPT, or SQLITE_NOTADB when the salt names another database); no slot accepts the
/// secret (SQLITE_NOTADB, naming the slot file); slots of the secret's kind whose key derivations together
/// exceed the work one unlock may spend trying them in turn, when no `slotID` is given (SQLITE_PERM,
/// `FMDatabaseError.exceedsKeySlotWorkBudget`: none was tried; name the slot); no database, or an empty one
/// (SQLITE_CANTOPEN: create it with
/// `KeySlots.createDatabase`, or ask for it with ``creatingDatabase(at:)``).
///
/// - Note: FMDB compatibility: FMDB has no key slots; this is an addition.
public final class KeySlotKeyProvider: KeyProvider {
    private struct CacheKey: Hashable {
        let salt: Data
        let fileDigest: Data
    }

    /// A slot file's refusal of the secret: its digest, its error, and when it was tried.
    private struct Refusal {
        let fileDigest: Data
        let error: FMDatabaseError
        let triedAt: ContinuousClock.Instant
        /// Whether it answered a changed slot file after an earlier refusal.
        let followsARefusal: Bool
    }

    private struct State {
        var keys: [CacheKey: SecureBytes] = [:]
        /// The data key last unlocked or confirmed for each database (by salt): kept while the slot file
        /// changes around it, as long as it still opens the database.
        var held: [Data: SecureBytes] = [:]
        /// The last slot file (by digest) whose unlock failed for each database (by salt), with its error:
        /// the same bytes give the same answer, so a new connection to a database whose slot file no longer
        /// accepts this secret costs no key derivation until the slot file changes.
        var refused: [Data: Refusal] = [:]
        var unlocks = 0
    }

    private let secret: KeySlotSecret
    private let slotID: Int?
    private let state: Protected<State>
    /// Held while a slot file is unlocked or a held key checked, so connections opened at once after a
    /// change cost one key derivation, not one each.
    private let unlocking: NSLock
    /// The one database (standardized path) this provider may create under the slot file beside it.
    private let newDatabasePath: String?
    /// Where the first refusal of the secret is said (warning level).
    private let logger: Logger
    /// After a refusal, the first change of the slot file is unlocked at once; when that is refused too, the
    /// shortest time before a later change is unlocked again (a key derivation): a service whose secret was
    /// refused spends at most one unlock per interval however often the slot file changes, and none while it
    /// does not.
    public let refusalRetryInterval: Duration

    /// A provider for `secret`, trying every slot of its kind in turn (within the work budget: see
    /// `FMDatabaseError.exceedsKeySlotWorkBudget`), or only slot `slotID` when given.
    /// - Parameters:
    ///   - secret: the passphrase, raw key or recovery key that opens a slot.
    ///   - slotID: the id of the one slot to try (``KeySlots/list(forDatabaseAt:)``); nil tries every slot of
    ///     the secret's kind.
    ///   - logger: where the first refusal of the secret is said, at warning level (the "fmdb" logger by default).
    ///   - logsRefusals: false when the caller reports a refusal itself (a command-line tool): nothing is logged.
    public convenience init(
        secret: KeySlotSecret, slotID: Int? = nil, logger: Logger = Logger(label: "fmdb"), logsRefusals: Bool = true
    ) {
        var logger = logger
        if !logsRefusals { logger.logLevel = .critical }
        self.init(secret: secret, slotID: slotID, logger: logger, refusalRetryInterval: .seconds(1))
    }

    /// A provider that says its first refusal on `logger`, and waits `refusalRetryInterval` before unlocking a
    /// changed slot file again after a refusal (tests).
    init(secret: KeySlotSecret, slotID: Int? = nil, logger: Logger, refusalRetryInterval: Duration) {
        self.secret = secret
        self.slotID = slotID
        state = Protected(State())
        unlocking = NSLock()
        newDatabasePath = nil
        self.logger = logger
        self.refusalRetryInterval = refusalRetryInterval
    }

    private init(
        secret: KeySlotSecret, slotID: Int?, state: Protected<State>, unlocking: NSLock, newDatabasePath: String,
        logger: Logger, refusalRetryInterval: Duration
    ) {
        self.secret = secret
        self.slotID = slotID
        self.state = state
        self.unlocking = unlocking
        self.newDatabasePath = newDatabasePath
        self.logger = logger
        self.refusalRetryInterval = refusalRetryInterval
    }

    /// A provider for the same secret that may also create the database at `path` — only that path, and
    /// only while it does not exist yet or is empty — under the identity of the slot file beside it (the
    /// data key and the slot file's salt): the way to fill a copy whose slot file was put there with
    /// `KeySlots.copySlotFile`, or a new slotted database whose slot file `KeySlots.createSlotFile` wrote.
    /// It shares this provider's unlocked keys, so a copy costs one key derivation.
    ///
    /// ```swift
    /// try KeySlots.copySlotFile(from: "app.db", to: "copy.db")
    /// let provider = KeySlotKeyProvider(secret: .passphrase("ops"))
    /// try db.setKey(using: provider)   // db: app.db, open
    /// try db.attachDatabase(atPath: "copy.db", schema: "copy", keyProvider: provider.creatingDatabase(at: "copy.db"))
    /// ```
    ///
    /// Ask only for a path whose slot file you put there yourself: whoever can write a slot file beside a
    /// path could otherwise choose the identity, and so the data key, of the database made there.
    /// - Note: FMDB compatibility: FMDB has no key slots; this is an addition.
    public func creatingDatabase(at path: String) -> KeySlotKeyProvider {
        KeySlotKeyProvider(
            secret: secret, slotID: slotID, state: state, unlocking: unlocking,
            newDatabasePath: Self.standardized(path),
            logger: logger, refusalRetryInterval: refusalRetryInterval)
    }

    private static func standardized(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// How many times a slot was unlocked (key derivations run): one, and one more per data-key rotation.
    public var derivationCount: Int { state.withLock { $0.unlocks } }

    /// The data key for `request` (see `KeyProvider`).
    /// - Throws: `FMDatabaseError` as listed above.
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        guard let path = request.databasePath, !path.isEmpty, path != ":memory:" else {
            throw FMDatabaseError.misuse("Key slots need a database file: an in-memory database has no slot file.")
        }
        guard let salt = request.salt else { return try keyForNewDatabase(at: path) }
        let slotPath = KeySlotFile.path(forDatabaseAt: path)
        let bytes = try KeySlotStorage.read(slotPath)
        let digest = bytes.withUnsafeBytes { KeySlotCrypto.sha256($0) }
        let cacheKey = CacheKey(salt: salt, fileDigest: digest)
        if let cached = state.withLock({ $0.keys[cacheKey] }) {
            return .raw(secure: cached, salt: nil)
        }
        unlocking.lock()
        defer { unlocking.unlock() }
        if let cached = state.withLock({ $0.keys[cacheKey] }) {
            return .raw(secure: cached, salt: nil)  // Another connection unlocked it meanwhile.
        }
        // The slot file changed since this provider last read it (a slot was added, changed or removed, or
        // the data key rotated). A slot change leaves the data key as it was: the key this provider holds
        // keeps opening the database, without a key derivation and even when this provider's secret no
        // longer opens any slot, as an unlocked volume stays unlocked after a passphrase change. Only a key
        // positively checked against the database is kept; otherwise the slot file is unlocked again.
        if let held = state.withLock({ $0.held[salt] }) {
            let probe = KeySlots.probe(path, key: held)
            switch probe {
            case .opens:
                state.withLock { $0.keys[cacheKey] = held }
                return .raw(secure: held, salt: nil)
            case .doesNotOpen:
                break  // The data key was rotated: the slot file tells the new one.
            case .locked, .couldNotCheck:
                throw KeySlots.uncheckedError(path, probe)
            }
        }
        let clock = ContinuousClock()
        let previous = state.withLock { $0.refused[salt] }
        if let previous {
            // This slot file refused the secret already: no key derivation again. The first change is tried at
            // once (an operator gave the secret a slot back); when that was refused too, a later change is
            // tried no sooner than the retry interval after it.
            if previous.fileDigest == digest
                || previous.followsARefusal && previous.triedAt.duration(to: clock.now) < refusalRetryInterval
            {
                throw previous.error
            }
        }
        let validated = try secret.validated()
        let opened: KeySlots.Opened
        do {
            opened = try KeySlots.unlock(
                bytes, secret: validated, slotID: slotID, databaseSalt: salt, slotPath: slotPath)
        } catch let error as FMDatabaseError
            where error.hasCode(.notADatabase, .corrupt, .permission)
        {
            // The slot file's own answer (no slot accepts the secret, another database's file, a damaged
            // file, over the work budget): the same bytes answer the same, so it is kept for them.
            state.withLock {
                $0.refused[salt] = Refusal(
                    fileDigest: digest, error: error, triedAt: clock.now, followsARefusal: previous != nil)
            }
            if previous == nil {
                let warning =
                    "KeySlotKeyProvider: the key slot file \(slotPath) refused this provider's secret "
                    + "(\(error.message)) Connections to \(path) fail at once, without a key derivation, until the "
                    + "slot file changes (tried again at most once per \(refusalRetryInterval)); a secret the slot "
                    + "file accepts opens it."
                logger.warning("\(warning)")
            }
            throw error
        }
        let key = try opened.currentDataKey(databasePath: path)
        state.withLock { state in
            state.keys[cacheKey] = key
            state.held[salt] = key
            state.refused[salt] = nil
            state.unlocks += 1
        }
        return .raw(secure: key, salt: nil)
    }

    /// True: a slotted database is made by `KeySlots.createDatabase` or `fmdb-cipher keys init`, or by a
    /// provider asked for that very path (``creatingDatabase(at:)``), so a queue or pool asks this provider
    /// before it opens a path where no database is, and creates no file when it refuses (see
    /// ``KeyProvider/requiresExistingDatabase``).
    public var requiresExistingDatabase: Bool { true }

    /// Forgets which slot file states it has read, so the next request reads the slot file again and
    /// checks the data key it holds against the database (see ``KeyProvider/reloadKey()``): a queue or pool
    /// calls it when its database turned out to be under a key it did not hold (a data key rotated while
    /// a rotation was pending). The data keys it holds stay until they no longer open the database.
    public func reloadKey() throws {
        state.withLock { $0.keys.removeAll() }
    }

    /// A database that does not exist yet (or is empty) that this provider was asked to create
    /// (`creatingDatabase(at:)`: a copy being made after `KeySlots.copySlotFile`, or after
    /// `KeySlots.createSlotFile`): the data key with the slot file's salt, so SQLCipher writes that salt
    /// into the new header and the slot file opens the database it makes.
    private func keyForNewDatabase(at path: String) throws -> DatabaseKey {
        let noDatabase = FMDatabaseError(
            code: SQLITE_CANTOPEN,
            message:
                "There is no slotted database at \(path) (create one with KeySlots.createDatabase or fmdb-cipher keys "
                + "init)."
        )
        // A plaintext (or unreadable) file has no salt either: only a database yet to be made takes the
        // slot file's identity.
        guard DatabaseFile.kind(atPath: path).isNew else { throw noDatabase }
        let slotPath = KeySlotFile.path(forDatabaseAt: path)
        var exists = stat()
        guard lstat(slotPath, &exists) == 0 else { throw noDatabase }
        // A slot file found beside a missing or empty database is not proof that it is this database's:
        // anyone with a slot of another database can put that database's slot file here.
        guard newDatabasePath == Self.standardized(path) else {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN,
                message:
                    "There is no database at \(path) (or it is empty), and the key slot file beside it is not used "
                    + "to create one: a slotted database is made with KeySlots.createDatabase or fmdb-cipher keys "
                    + "init, a copy through KeySlotKeyProvider.creatingDatabase(at:)."
            )
        }
        let bytes = try KeySlotStorage.read(slotPath)
        guard let salt = try KeySlotFile.parse(bytes).file.databaseSalt else {
            throw KeySlotFile.corrupt("its database salt is malformed")
        }
        let digest = bytes.withUnsafeBytes { KeySlotCrypto.sha256($0) }
        let cacheKey = CacheKey(salt: salt, fileDigest: digest)
        if let cached = state.withLock({ $0.keys[cacheKey] }) {
            return .raw(secure: cached, salt: SecureBytes(salt))
        }
        let opened = try KeySlots.unlock(
            bytes, secret: try secret.validated(), slotID: slotID, databaseSalt: salt, slotPath: slotPath)
        // An empty file cannot tell which key of a pending rotation it is under: it takes the current one,
        // which the slot file wraps too (opening it later probes, as for any database).
        guard let key = opened.dataKeys[opened.file.body.generation] else {
            throw KeySlotFile.corrupt("a generation is missing")
        }
        state.withLock { state in
            state.keys[cacheKey] = key
            state.held[salt] = key
            state.unlocks += 1
        }
        return .raw(secure: key, salt: SecureBytes(salt))
    }
}
