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

/// Changing the key: FMDB's `rekey(_:)`/`rekeyWith(_:)`, `rekey(using:)`, and the engine under them and
/// `rekeySafely(using:busyTimeout:)` (the key-safety rules of `FMDatabase+SQLCipher.swift`).
extension FMDatabase {
    /// Changes the key of an encrypted database (every page is re-encrypted).
    ///
    /// ```swift
    /// guard db.rekey("new passphrase") else { print(db.lastErrorMessage()); return }
    /// ```
    /// - Returns: true when the key changed; false on error: the database then still opens with the old
    ///   key, except for code 11 (`SQLITE_CORRUPT`: neither key opens it). No WAL checkpoint is run here;
    ///   `rekeySafely(using:)` runs one and reports it separately.
    @discardableResult
    public func rekey(_ key: String) -> Bool {
        recordingBool { try rekeyConnection(to: SecureBytes(utf8: key)) }
    }

    /// Changes the key to key bytes (a passphrase, or `x'<64 hex digits>'`), with the same checks as `rekey(_:)`.
    @discardableResult
    public func rekeyWith(_ keyData: Data) -> Bool {
        recordingBool { try rekeyConnection(to: SecureBytes(keyData)) }
    }

    /// Changes the key to the one `provider` gives for this file, with the same checks as `rekey(_:)`.
    ///
    /// ```swift
    /// try db.rekey(using: PBKDF2KeyProvider(passphrase: "new"))
    /// ```
    /// - Throws: when the key did not change (the old key still opens the database), or code 11 when
    ///   neither key opens it. Returning means the new key is in force.
    public func rekey(using provider: any KeyProvider) throws {
        try recording {
            try refuseRekeyBesideSlotFile()
            // Derived over the salt the connection was keyed with when its settings gave one (a file with a
            // plaintext header does not hold it): a random one would be written and kept nowhere.
            let key = try provider.key(for: keySettings.keyRequest(keyRequest().request)).validated()
            try rekeyConnection(to: key.sqlcipherKeyBytes())
        }
    }

    /// `sqlite3_rekey_v2` with the checks SQLCipher 3.4.1 does not make itself.
    func rekeyConnection(to newKey: SecureBytes) throws {
        let connection = try requireConnection()
        try refuseRekeyBesideSlotFile()
        guard !newKey.isEmpty else {
            throw FMDatabaseError.misuse("An empty key was given: the database would not be encrypted.")
        }
        guard connection.isAutocommit else {
            throw FMDatabaseError.misuse("Cannot rekey inside a transaction or savepoint: commit or roll back first.")
        }
        guard !hasOpenResultSets else {
            throw FMDatabaseError.misuse("Cannot rekey while result sets are open: close them first.")
        }
        guard try connection.isKeyed() else {
            throw FMDatabaseError.misuse(
                "Cannot rekey a database that is not encrypted: rekey only changes an existing key. Use "
                    + "sqlcipher_export (fmdb-cipher encrypt) to encrypt a plaintext database."
            )
        }
        // A rekey that does not take is undone by reopening with the old key, which the library must hold.
        guard let oldKey = appliedKey else {
            throw FMDatabaseError.misuse(
                "Cannot rekey a connection keyed by SQL text (PRAGMA key): the old key is needed to reopen the "
                    + "database if the rekey does not take. Key the connection with setKey (or setKey(using:)), "
                    + "then rekey."
            )
        }
        if isFileBacked, let path = databasePath, DatabaseFile.kind(atPath: path) == .plaintext {
            throw FMDatabaseError.misuse(
                "Cannot rekey a plaintext database: use sqlcipher_export (fmdb-cipher encrypt).")
        }
        if connection.isReadOnly() {
            throw FMDatabaseError(
                code: SQLITE_READONLY,
                message: "Cannot rekey a read-only database (read-only file, filesystem or open flags).")
        }
        try checkKDFFloorForRekey(to: newKey)
        try newKey.requireEmbeddedSalt(matching: keySettings.salt)
        // A rekey is one transaction: without a rollback journal or a WAL (journal_mode OFF or MEMORY) a
        // failure part way leaves pages under both keys, and page 1 alone could say "done".
        let journalMode = try connection.pragmaText("PRAGMA journal_mode")?.lowercased() ?? ""
        guard ["delete", "truncate", "persist", "wal"].contains(journalMode) else {
            throw FMDatabaseError.misuse(
                "Cannot rekey with journal_mode = \(journalMode): a failure part way could not be rolled back. "
                    + "Set PRAGMA journal_mode = DELETE (or WAL) first.")
        }
        clearCachedStatements()
        // Reading the page count also checks that the current key works.
        let pageCount = Int(try connection.pragmaText("PRAGMA page_count") ?? "0") ?? 0
        let writtenBefore = connection.pagesWritten
        // The system error of a failed write, which SQLCipher 3.4.1 does not report: evidence for the
        // message only (errno keeps the last failure; the verdict comes from which key opens the file).
        errno = 0
        let rc = connection.rekey(newKey)
        let systemErrorAfterRekey = errno
        // sqlite3_rekey_v2 returns OK even when it could not take the write lock: every page is
        // rewritten when it took, so SQLite's written-pages counter tells.
        let tookByCounter = rc == SQLITE_OK && (pageCount == 0 || connection.pagesWritten > writtenBefore)
        // A probe cannot tell two equal keys apart: then (and for a database without a file) the counter decides.
        guard isFileBacked, let path = databasePath, !newKey.isEqual(to: oldKey) else {
            if tookByCounter {
                appliedKey = newKey
                return
            }
            // SQLCipher may have left the new key as the write key: never write under a half-applied key.
            if isFileBacked {
                try? reopenConnection(key: oldKey)
            } else {
                _ = connection.rekey(oldKey)
            }
            throw rekeyFailure(rc, systemError: systemErrorAfterRekey)
        }
        // For a file, which key opens it decides, not SQLCipher's answer or the counter: SQLCipher 3.4.1
        // also returns OK when its commit failed after the page cache spilled (a full disk), and rolls
        // back. Asked first with this connection left open (so its handle stays the same when the rekey
        // took); when that does not say "new key", again after closing it, since it may hold a lock or
        // leave a hot journal that the probing connection must roll back.
        let settings = keySettings
        let timeout = keyProbeBusyTimeout
        let formatStatements = (try? settings.formatStatements()) ?? []
        func probe(_ key: SecureBytes, waiting wait: TimeInterval? = nil) -> Connection.KeyProbe {
            Connection.probeKey(
                key, path: path, flags: openFlags, vfs: openVFS, formatStatements: formatStatements,
                pageSize: settings.pageSize,
                kdfIterations: settings.kdfIterations, busyTimeout: wait ?? timeout)
        }
        // The quick look, with this connection still open, does not wait: after a failed commit this
        // connection's own lock would hold it for the whole busy timeout. Anything but "opens" is asked
        // again below, with the connection closed and the full timeout.
        if rc == SQLITE_OK, case .opens = probe(newKey, waiting: 0) {
            appliedKey = newKey
            return
        }
        closeConnection()
        // Only a key that positively opens the file, or two that positively do not, decide. A probe that
        // could not check (an I/O error, a disk that stays full so a hot journal cannot be rolled back, a
        // lock held throughout) is its own answer: never SQLite's counter, never "neither".
        let verdict: RekeyVerdict
        let newKeyOpens = probe(newKey)
        if case .opens = newKeyOpens {
            verdict = .done
        } else {
            switch (probe(oldKey), newKeyOpens) {
            case (.opens, _):
                verdict = .notDone
            case (.doesNotOpen(let error), .doesNotOpen):
                verdict = .neitherKeyOpens(error)
            case (let oldKeyOpens, _):
                let cause =
                    newKeyOpens.verdict.error.flatMap { $0.hasCode(.notADatabase) ? nil : $0 }
                    ?? oldKeyOpens.verdict.error
                    ?? FMDatabaseError(code: SQLITE_ERROR, message: "the file could not be read")
                verdict = .unchecked(cause)
            }
        }
        switch verdict {
        case .done:
            // Done: from here on nothing may report the rekey as failed. A reopen that fails leaves this
            // FMDatabase closed (the next call says so); the file opens with the new key.
            keySettings = settings
            do {
                try reopenConnection(key: newKey)
            } catch {
                logger.error("The rekey took, but the connection could not be reopened with the new key: \(error)")
            }
        case .notDone:
            keySettings = settings
            try? reopenConnection(key: oldKey)
            throw rekeyFailure(rc, systemError: systemErrorAfterRekey)
        case .neitherKeyOpens(let error):
            keySettings = settings
            try? reopenConnection(key: oldKey)
            throw FMDatabaseError(
                code: SQLITE_CORRUPT,
                message: "After the rekey neither the old nor the new key opens the database (\(error.message)): "
                    + "restore it from a backup."
            )
        case .unchecked(let cause):
            // The connection stays closed: writing under a key that may be the wrong one would corrupt the file.
            keySettings = settings
            throw FMDatabaseError(
                code: cause.hasCode(.notADatabase) ? SQLITE_IOERR : cause.extendedCode,
                message:
                    "After the rekey, which key opens the database could not be checked (\(cause.message)): it opens "
                    + "with the old key or the new one, and the rekey cannot have mixed them. Try each key once the "
                    + "cause is fixed; do not restore a backup for this.",
                marks: [.rekeyOutcomeUnchecked]
            )
        }
    }

    /// A database with a slot file beside it is under a data key the slots wrap: a plain rekey would
    /// leave every slot opening nothing. Only `KeySlots.rotateDataKey` changes its key.
    func refuseRekeyBesideSlotFile() throws {
        guard !isKeySlotRotation, isFileBacked, let path = databasePath else { return }
        var info = stat()
        guard lstat(KeySlotFile.path(forDatabaseAt: path), &info) == 0 else { return }
        throw FMDatabaseError.misuse(
            "\(path) has key slots (\(KeySlotFile.path(forDatabaseAt: path))): a plain rekey would make every slot "
                + "stop opening it. Change a slot with KeySlots.changeSlot, or the data key itself with "
                + "KeySlots.rotateDataKey."
        )
    }

    private enum RekeyVerdict {
        case done, notDone, neitherKeyOpens(FMDatabaseError), unchecked(FMDatabaseError)
    }

    /// Why a rekey did not take, asked of the (reopened) connection: another connection's lock, or a
    /// damaged file that SQLCipher could not read every page of.
    private func rekeyFailure(_ rc: Int32, systemError: Int32 = 0) -> FMDatabaseError {
        let suffix = "; the database still uses the old key."
        if rc != SQLITE_OK {
            return FMDatabaseError(
                code: rc, message: "The rekey failed (\(FMDatabaseError.defaultMessage(for: rc)))" + suffix)
        }
        guard let connection else {
            return FMDatabaseError(code: SQLITE_ERROR, message: "The rekey did not take" + suffix)
        }
        let savedTimeout = maxBusyRetryTimeInterval
        maxBusyRetryTimeInterval = 0
        defer { maxBusyRetryTimeInterval = savedTimeout }
        do {
            // EXCLUSIVE, as the rekey's commit needs: a reader's shared lock blocks it in rollback-journal mode.
            try connection.execute("BEGIN EXCLUSIVE")
            try connection.execute("ROLLBACK")
        } catch let error as FMDatabaseError where error.hasCode(.busy, .locked) {
            return FMDatabaseError(
                code: SQLITE_BUSY,
                message: "The rekey did not take (the database is locked by another connection)" + suffix)
        } catch let error as FMDatabaseError where error.hasCode(.readOnly, .full, .ioError) {
            return FMDatabaseError(
                code: error.resultCode, message: "The rekey did not take (\(error.message))" + suffix)
        } catch {
            // Judged below.
        }
        // No lock is held now. SQLCipher 3.4.1 said OK; a write that failed during the rekey left its errno
        // (evidence for the message only: asked after the lock, which a stale errno must not hide).
        switch FileSystem.resultCode(forSystemError: systemError) {
        case SQLITE_FULL?:
            return FMDatabaseError(code: SQLITE_FULL, message: "The rekey did not take (the disk is full)" + suffix)
        case SQLITE_IOERR?:
            return FMDatabaseError(
                code: SQLITE_IOERR, message: "The rekey did not take (a disk I/O error while writing)" + suffix)
        case SQLITE_READONLY?:
            return FMDatabaseError(
                code: SQLITE_READONLY, message: "The rekey did not take (a read-only file system)" + suffix)
        default:
            break
        }
        if let path = databasePath, isFileBacked, DatabaseFile.lacksSpaceToRewrite(path) {
            return FMDatabaseError(
                code: SQLITE_FULL,
                message: "The rekey did not take (not enough free disk space to rewrite every page)" + suffix)
        }
        if let check = try? connection.pragmaText("PRAGMA quick_check"), check != "ok" {
            return FMDatabaseError(
                code: SQLITE_CORRUPT, message: "The rekey did not take: the database is damaged (\(check))" + suffix)
        }
        // No lock is held now, space is there, the file is intact: SQLite did not say what stopped it.
        return FMDatabaseError(
            code: SQLITE_IOERR,
            message:
                "The rekey did not take (SQLite did not report why: a write failed, or another connection held a lock "
                + "that is gone now)" + suffix
        )
    }
}
