import Foundation

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
            // Returned, not logged: the caller has it (an error is reported once).
            return .checkpointPending(error)
        } catch {
            return .checkpointPending(FMDatabaseError(code: SQLITE_ERROR, message: "\(error)"))
        }
    }
}
