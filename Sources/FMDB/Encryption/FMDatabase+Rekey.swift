import Foundation

/// What a rekey that did not throw did: the new key is in force in both cases.
///
/// A rekey call has exactly three outcomes, which never overlap:
/// - it **throws**: not done, the old key still opens the database (or, code 11 `SQLITE_CORRUPT`, neither
///   key does: restore a backup);
/// - it returns `.done`: only the new key opens the database, and nothing is left to do;
/// - it returns `.checkpointPending(error)`: only the new key opens the database, but the WAL
///   checkpoint that moves every page out of the `-wal` file could not run (another connection was
///   reading, say); until a later checkpoint the main file still holds pages under the old key.
///
/// ```swift
/// switch try queue.rekey(using: newProvider) {
/// case .done: print("rekeyed")
/// case .checkpointPending(let error): print("rekeyed; checkpoint pending: \(error.message)")
/// }
/// ```
///
/// - Note: FMDB compatibility: an addition; FMDB's `rekey:` returns a Bool.
public enum FMRekeyOutcome: Equatable, Sendable {
    /// The new key is in force, verified on a fresh connection, and the WAL (if any) was checkpointed.
    case done
    /// The new key is in force and verified, but the WAL checkpoint failed with `error` (usually
    /// `SQLITE_BUSY`): SQLite checkpoints again when the last connection closes, or call
    /// `checkpoint(.truncate)` later.
    case checkpointPending(FMDatabaseError)
}

extension FMDatabase {
    /// The busy timeout of a queue's or pool's rekey when the call gives none: 5 seconds, or the
    /// connection's `maxBusyRetryTimeInterval` when longer.
    var sharedRekeyBusyTimeout: TimeInterval { max(5, maxBusyRetryTimeInterval) }

    /// How long a probe of which key opens the file waits for other connections' locks: at least 1 second.
    var keyProbeBusyTimeout: TimeInterval { max(1, maxBusyRetryTimeInterval) }

    /// The outcome of a rekey that took when its connection could not be reopened: a WAL beside the file
    /// (non-empty) means its checkpoint is still to come, which the closed connection cannot run.
    static func outcomeWithoutAConnection(databasePath: String?) -> FMRekeyOutcome {
        let walSize =
            databasePath.flatMap { try? FileManager.default.attributesOfItem(atPath: $0 + "-wal")[.size] } as? Int
        if let walSize, walSize > 0 {
            return .checkpointPending(
                FMDatabaseError(
                    code: SQLITE_CANTOPEN,
                    message: "The connection could not be reopened with the new key to checkpoint the WAL."))
        }
        return .done
    }

    /// Changes the key safely, the way the queue, the pool and `fmdb-cipher rekey` do: outside any
    /// transaction, waiting up to `busyTimeout` seconds for other connections' locks; which key opens the
    /// file afterwards is checked on a fresh connection (SQLCipher 3.4.1's own answer cannot be trusted);
    /// then the WAL, if any, is checkpointed (TRUNCATE) so no page under the old key stays in the file.
    ///
    /// ```swift
    /// let outcome = try db.rekeySafely(using: PBKDF2KeyProvider(passphrase: "new"))
    /// if case .checkpointPending = outcome { /* the key changed; checkpoint later */ }
    /// ```
    /// - Returns: `.done`, or `.checkpointPending` when only the checkpoint failed (the key did change).
    /// - Throws: `FMDatabaseError` when the rekey did not take: the old key still opens the database
    ///   (`SQLITE_BUSY` when another connection held a lock; `SQLITE_FULL`, `SQLITE_READONLY`, ...), or
    ///   `SQLITE_CORRUPT` when neither key opens it.
    @discardableResult
    public func rekeySafely(using provider: any KeyProvider, busyTimeout: TimeInterval = 5) throws -> FMRekeyOutcome {
        let savedTimeout = maxBusyRetryTimeInterval
        maxBusyRetryTimeInterval = busyTimeout
        defer { maxBusyRetryTimeInterval = savedTimeout }
        // Throws only when the key did not change (checked by which key opens the file).
        try rekey(using: provider)
        // From here the key has changed: nothing below may throw.
        guard isOpen else {
            // The reopen with the new key failed (logged).
            return Self.outcomeWithoutAConnection(databasePath: isFileBacked ? databasePath : nil)
        }
        guard (try? connection?.pragmaText("PRAGMA journal_mode")) == "wal" else { return .done }
        do {
            try checkpoint(.truncate, name: nil, logFrameCount: nil, checkpointCount: nil)
            return .done
        } catch let error as FMDatabaseError {
            logger.warning("The key was changed, but the WAL checkpoint is pending: \(error.message)")
            return .checkpointPending(error)
        } catch {
            return .checkpointPending(FMDatabaseError(code: SQLITE_ERROR, message: "\(error)"))
        }
    }
}
