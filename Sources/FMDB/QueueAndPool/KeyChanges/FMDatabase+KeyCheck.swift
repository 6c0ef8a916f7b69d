import Foundation
import Synchronization

/// The key check of a keyed queue's or pool's connection: whether it still reads the file under its key, and
/// why it must be replaced when it does not (``KeyCheckFailure``).
extension FMDatabase {
    /// The primary result codes with which a statement can meet a page that does not decrypt under the
    /// connection's key: 26 (SQLCipher 3.x to 4.6, and the first failed read on 4.7 and later), 7 (every
    /// later read of that connection on 4.7 and later), and an I/O error or corruption (a damaged read).
    /// Meeting one of them is only the cue to check (`keyCheckFailure()`); it says nothing by itself.
    static func mayMeanAnotherKey(_ code: Int32) -> Bool {
        switch FMResultCode(rawValue: code) {
        case .notADatabase, .outOfMemory, .ioError, .corrupt: return true
        default: return false
        }
    }

    /// Whether this keyed connection, which opened the file before, still reads it under its key; when it
    /// does not, why it must be replaced (``KeyCheckFailure``). nil when the file reads, or when the check
    /// could not run now (a lock, an interrupt: the caller's own work meets it). Cheap when nothing changed:
    /// the header page is in the connection's cache, and the check's statement is prepared once per
    /// connection (BENCHMARKS.md, "The per-block key check"). Only when the connection's own read fails is
    /// a fresh connection opened, keyed with this one's key and cipher settings, to tell a changed key from
    /// a connection that cannot read any more.
    func keyCheckFailure() -> KeyCheckFailure? {
        asOwner { checkKey() }
    }

    /// The check's SQL: reading the schema cookie reads page 1, which a key change makes unreadable.
    private static let keyCheckSQL = "PRAGMA schema_version"

    /// Before a block: `keyCheckFailure()`, left out when this connection read the file under its key
    /// less than ``keyCheckInterval`` ago (it then served the block before this one).
    ///
    /// Under a service's load a check is a read transaction of its own that another connection's writes
    /// make cost about 2 µs and a wait on SQLite's locks, before every read (BENCHMARKS.md, "The per-block
    /// key check"). Left out, a key change that lands in the interval is met by the block's own first
    /// statement instead: that block fails with code 26, as one running at the change does, and its
    /// connection is closed at check-in. So at most one block per connection fails per key change, as
    /// before; the interval only widens "running at the change" to "started within a millisecond of it".
    func keyCheckFailureBeforeBlock() -> KeyCheckFailure? {
        asOwner {
            let now = DispatchTime.now().uptimeNanoseconds
            let interval = Self.keyCheckInterval.load(ordering: .relaxed)
            if keyConfirmedAt != 0, now &- keyConfirmedAt < interval { return nil }
            return checkKey(confirmedAt: now)
        }
    }

    /// How long (nanoseconds) a connection that read the file under its key before a block is not checked
    /// again: 1 ms. Tests set it (0: check before every block).
    static let keyCheckInterval = Atomic<UInt64>(1_000_000)

    /// `confirmedAt`: when the check started (0: not before a block); recorded when the file read under
    /// this connection's key.
    private func checkKey(confirmedAt: UInt64 = 0) -> KeyCheckFailure? {
        guard let connection else { return nil }
        // Failed once, failed for good: the connection is being replaced (and on SQLCipher 4.7 and later it
        // would only report code 7 now).
        if let keyCheckFailed { return keyCheckFailed }
        // A file replaced at the path reads fine under this key, but it is the old file: a stat(2) tells.
        if connection.mainFileHasMoved(openedAs: databasePath) {
            keyCheckFailed = .replaced
            return .replaced
        }
        // Kept in the connection's statement cache whatever `shouldCacheStatements` says (only the FMDB
        // query paths look there when it is false, and never for this SQL); finalized when the connection closes.
        keyCheckCounters?.countKeyCheck()
        let code: Int32
        if let cached = statementCache.take(Self.keyCheckSQL) {
            code = Self.step(cached)
        } else {
            do {
                let statement = try connection.prepare(Self.keyCheckSQL)
                code = Self.step(statement)
                statementCache.insert(statement)
            } catch let error as FMDatabaseError {
                code = error.resultCode
            } catch {
                return nil
            }
        }
        let result = FMResultCode(rawValue: code)
        switch result {
        case FMResultCode(rawValue: SQLITE_ROW):
            if confirmedAt != 0 { keyConfirmedAt = confirmedAt }
            return nil
        case .busy, .locked, .interrupted:
            return nil
        default:
            // This connection cannot read page 1. Whether its key still opens the file is asked of the file.
            let failure: KeyCheckFailure = probeOwnKey() ? .unreadable(code: result.primary.rawValue) : .anotherKey
            keyCheckFailed = failure
            return failure
        }
    }

    private static func step(_ statement: Statement) -> Int32 {
        statement.inUse = true
        defer {
            statement.inUse = false
            statement.reset()
        }
        return statement.step()
    }

    /// How long the fresh connection of `probeOwnKey()` waits for a lock before it counts as "could not tell".
    private static let ownKeyProbeBusyTimeout: TimeInterval = 0.2

    /// False only when a fresh connection, keyed with this connection's key and cipher settings, finds
    /// the file under another key; true when it reads the file, or could not tell (a lock, an I/O error).
    private func probeOwnKey() -> Bool {
        guard let key = appliedKey, let path = databasePath, !path.isEmpty, path != ":memory:" else { return true }
        let settings = keySettings
        let probe = Connection.probeKey(
            key, path: path, flags: openFlags, vfs: openVFS,
            formatStatements: (try? settings.formatStatements()) ?? [], pageSize: settings.pageSize,
            kdfIterations: settings.kdfIterations, busyTimeout: Self.ownKeyProbeBusyTimeout)
        if case .doesNotOpen = probe { return false }
        return true
    }

    /// The identity of the file this connection just rekeyed, read at `path` while the connection's file is
    /// still the one there; nil when it is not (another file was renamed in meanwhile), or when the connection
    /// is closed: then nobody else is told, rather than a provider being handed to another file's members.
    func rekeyedFileIdentity(path: String?) -> KeyChangeRegistry.FileIdentity? {
        guard isOpen, !mainFileHasMoved() else { return nil }
        return path.flatMap(KeyChangeRegistry.FileIdentity.init(path:))
    }

    /// Whether the file this connection opened is no longer the one at its path (checked now, whatever the
    /// key check interval): a rekey must not run on it.
    func mainFileHasMoved() -> Bool {
        asOwner { connection?.mainFileHasMoved(openedAs: databasePath) ?? false }
    }

    /// After a block of a keyed queue or pool: why its connection must be replaced, when the block met an
    /// error a failed page read gives (`mayMeanAnotherKey`), or `SQLITE_READONLY` (what a write meets in a file
    /// replaced at its path: `SQLITE_READONLY_DBMOVED`), and the connection then fails the check (so an
    /// attached file's own error does not count). An immediate or exclusive transaction is not checked before
    /// its block, and its BEGIN reads the old file fine: without this its connection would stay on it.
    func keyCheckFailureAfterBlock() -> KeyCheckFailure? {
        // A failure a check found during the block (the block's own error handling) stands, whatever ran since.
        if let failed = asOwner({ keyCheckFailed }) { return failed }
        guard asOwner({ Self.mayMeanKeyOrFileChanged(lastErrorCode()) }) else { return nil }
        return keyCheckFailure()
    }

    /// ``mayMeanAnotherKey(_:)``, or `SQLITE_READONLY`: what a write meets in a file that was replaced at its path
    /// after the connection opened it (`SQLITE_READONLY_DBMOVED`). Only the cue to check, as there.
    static func mayMeanKeyOrFileChanged(_ code: Int32) -> Bool {
        mayMeanAnotherKey(code) || FMResultCode.readOnly ~= FMResultCode(rawValue: code)
    }

    /// The error a block gets when its connection was found unable to read the file under its key: the
    /// same code, and what happened (rekeyed elsewhere only when checking found another key).
    static func keyChangedError(path: String?, cause: Error, failure: KeyCheckFailure) -> FMDatabaseError {
        let what: String
        switch failure {
        case .anotherKey:
            what =
                "was rekeyed while this block ran, or less than a millisecond before it started (its key was "
                + "changed elsewhere after this connection last read the file)"
        case .unreadable(let code):
            what =
                "could no longer be read by this block's connection (code \(code) on its own read; its key was not "
                + "shown to be wrong)"
        case .replaced:
            what =
                "was replaced at its path (renamed over, renamed away or removed) after this block's connection "
                + "opened it"
        }
        let shownPath = SQLRedaction.loggablePath(path ?? ":memory:")
        return FMDatabaseError(
            code: (cause as? FMDatabaseError)?.extendedCode ?? SQLITE_NOTADB,
            message:
                "The database at \(shownPath) \(what): the block was stopped and is not run again; its "
                + "connection was closed, and the next one is opened with the key provider asked again.",
            marks: [.connectionReplaced])
    }

    /// Runs `body`, a queue's or pool's transaction on this connection, with its BEGIN serving as the
    /// connection's key check when `beginChecksKey` (immediate and exclusive transactions: see `record`).
    func withBeginAsKeyCheck<T>(_ beginChecksKey: Bool, _ body: () throws -> T) rethrows -> T {
        beginProbesKey = beginChecksKey
        defer { beginProbesKey = false }
        return try body()
    }

    /// How many BEGINs a queue or pool transaction makes when each meets the file under a key changed
    /// elsewhere (before its block runs): one for an idle connection still under an old key, and one for
    /// each key change that lands while BEGIN waits for the write lock.
    static let transactionAttemptsAcrossKeyChanges = 4
}
