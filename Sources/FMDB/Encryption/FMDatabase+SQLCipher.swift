import Foundation

/// SQLCipher on one connection: keys, rekeys, and the cipher's facts.
///
/// Key safety on SQLCipher 3.4.1, whose own calls do not report these (<doc:KeysAndKeyProviders>):
/// - keying a connection again with a *different* key after it has read or written the file is an
///   error (SQLITE_MISUSE); keying again with the *same* key is a no-op that succeeds;
/// - rekeying inside a transaction or savepoint, with open result sets, or a plaintext database is
///   an error (SQLITE_MISUSE);
/// - whether a rekey took is decided by which key opens the file afterwards (fresh connections, new key
///   then old), never by SQLCipher's answer alone: it returns OK when it could not take the write lock
///   and when its commit failed on a full disk. A rekey that did not take is an error (SQLITE_BUSY,
///   SQLITE_FULL, ...) and the connection is reopened with the old key, so it never writes under a
///   half-applied key; when neither key opens the file the error is SQLITE_CORRUPT.
///
/// Keys reach SQLCipher only through `sqlite3_key_v2`/`sqlite3_rekey_v2` (both called in
/// `Core/Connection+Operations.swift` only), never as SQL text, so no trace or log line shows one. Every
/// keyed connection runs `PRAGMA temp_store = MEMORY`; one keyed through `setKey(using:)` also
/// `PRAGMA cache_size = -8192` (`keyedConnectionCacheSizeKiB`).
extension FMDatabase {
    /// Keys the connection with a passphrase (SQLCipher derives the key, as `PRAGMA key = '...'`).
    /// Call right after `open()`, before any other statement.
    ///
    /// ```swift
    /// let db = FMDatabase(path: path)
    /// db.open()
    /// db.setKey("correct horse battery staple")
    /// ```
    /// - Returns: false on error (empty key; a used connection keyed with a different key).
    /// - Note: FMDB compatibility: FMDB does not verify the key here either; a wrong key shows at the
    ///   first query (code 26). `setKey(using:)` verifies at once.
    ///
    /// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#key>
    @discardableResult
    public func setKey(_ key: String) -> Bool {
        recordingBool { try applyKey(SecureBytes(utf8: key)) }
    }

    /// Keys the connection with key bytes (a passphrase, or `x'<64 hex digits>'` for a raw key).
    @discardableResult
    public func setKeyWith(_ keyData: Data) -> Bool {
        recordingBool { try applyKey(SecureBytes(keyData)) }
    }

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

    /// Keys the connection with the key `provider` gives for this file, and verifies it: a wrong
    /// key (or a plaintext file) throws code 26 (SQLITE_NOTADB) here, not at a later query. After a
    /// wrong key the connection is reopened unkeyed, so another key can be tried. An existing file's
    /// format is found (`CipherFormat`, `cipherFormat`): SQLCipher 1-3 files open on SQLCipher 4 as they
    /// are; on SQLCipher 3 the right key to a SQLCipher 4 file throws code 24 (SQLITE_FORMAT).
    ///
    /// ```swift
    /// try db.setKey(using: PBKDF2KeyProvider(passphrase: "secret"))
    /// ```
    public func setKey(using provider: any KeyProvider) throws {
        try setKey(using: provider, settings: CipherSettings())
    }

    /// Keys the connection, applies cipher `settings` (a file written with a non-default page size or
    /// KDF iteration count needs the same settings to open), then verifies the key.
    ///
    /// ```swift
    /// try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(pageSize: 4096))
    /// ```
    public func setKey(using provider: any KeyProvider, settings: CipherSettings) throws {
        try recording {
            // A closed database fails here, before the provider is asked for a key. (After a failed try on
            // a new file, applyKey keys a fresh connection.)
            _ = try requireConnection()
            let (request, kind) = keyRequest()
            do {
                try settings.validate(creatingFile: kind?.isNew ?? true)
                // Keys, applies the settings and verifies; finds an existing file's format (CipherFormat).
                try keyFindingFormat(using: provider, settings: settings, request: request, kind: kind)
            } catch {
                if appliedKey == nil, kind?.isNew ?? true {
                    // A program that goes on after this error must not write a new file in plaintext (an
                    // existing encrypted file cannot be written without its key anyway).
                    connection?.requireKey()
                    // The file did not exist before this FMDatabase's open made it: `close()` removes it
                    // while it is still empty, so a failed keying leaves nothing behind (a file left there
                    // would block a later create, such as KeySlots.createDatabase).
                    keyingFailedOnCreatedFile = filesCreatedByOpen != nil
                }
                throw error
            }
            filesCreatedByOpen = nil
            keyingFailedOnCreatedFile = false
            try applyKeyedConnectionDefaults(on: requireConnection())
            // Any key "works" on an empty file, which SQLCipher creates on the first write. Write the
            // first page now, so the salt the key was made for is on disk before another connection
            // (of a pool, say) asks for a key for this file.
            // (keyFindingFormat may have reopened the connection: ask for the current one.)
            if kind?.isNew == true, (openFlags & SQLITE_OPEN_READONLY) == 0 {
                try requireConnection().execute("PRAGMA user_version = 0")
            }
        }
    }

    /// Changes the key to the one `provider` gives for this file, with the safety rules above.
    ///
    /// ```swift
    /// try db.rekey(using: PBKDF2KeyProvider(passphrase: "new"))
    /// ```
    /// - Throws: when the key did not change (the old key still opens the database), or code 11 when
    ///   neither key opens it. Returning means the new key is in force.
    public func rekey(using provider: any KeyProvider) throws {
        try recording {
            try refuseRekeyBesideSlotFile()
            let key = try provider.key(for: keyRequest().request).validated()
            try rekeyConnection(to: key.sqlcipherKeyBytes())
        }
    }

    /// The page cache, in KiB, that `setKey(using:)` sets once the key is verified (`PRAGMA cache_size =
    /// -8192`: 8 MiB of decrypted pages, against SQLite's default 2,000 KiB); keyed queues and pools
    /// get it too. A miss on a keyed connection reads, authenticates (HMAC) and decrypts the page
    /// again, so the larger cache keeps a working set of up to 8 MiB decrypted; the cost is up to that
    /// much memory per keyed connection, taken only as pages are read. To override it, run your own
    /// `PRAGMA cache_size` after keying:
    ///
    /// ```swift
    /// try db.setKey(using: provider)
    /// db.executeStatements("PRAGMA cache_size = -2000")   // SQLite's default again
    /// ```
    /// A connection reopened with its old key after a rekey that did not take is back to SQLite's
    /// default (that recovery path reads nothing it need not).
    /// - Note: FMDB compatibility: FMDB leaves SQLite's default cache size on every connection, and so
    ///   do `setKey(_:)`/`setKeyWith(_:)` here: they do not read the database (a wrong key shows at the
    ///   first query), and setting the cache size would.
    public static let keyedConnectionCacheSizeKiB = 8192

    /// SQLCipher's version (`PRAGMA cipher_version`), e.g. "3.4.1" on Debian 12; nil when not open.
    public var cipherVersion: String? { cipherPragma("cipher_version") }

    /// The crypto library SQLCipher uses (`PRAGMA cipher_provider`), e.g. "openssl"; nil when not open.
    public var cipherProvider: String? { cipherPragma("cipher_provider") }

    /// The crypto library's version (`PRAGMA cipher_provider_version`); nil when not open.
    public var cipherProviderVersion: String? { cipherPragma("cipher_provider_version") }

    /// `PRAGMA cipher_fips_status`: "1" when the provider runs in FIPS mode.
    public var cipherFipsStatus: String? { cipherPragma("cipher_fips_status") }

    // MARK: - Engine

    /// The key request for this database, and what its file's header said (nil: not a file).
    func keyRequest() -> (request: KeyRequest, kind: DatabaseFile.Kind?) {
        guard isFileBacked, let path = databasePath else {
            return (KeyRequest(databasePath: databasePath, salt: nil), nil)
        }
        return Self.keyRequest(forFileAt: path)
    }

    /// The key request for the file at `path` (with its salt when it is encrypted), from one header read.
    static func keyRequest(forFileAt path: String) -> (request: KeyRequest, kind: DatabaseFile.Kind) {
        let kind = DatabaseFile.kind(atPath: path)
        if case .encrypted(let salt) = kind {
            return (KeyRequest(databasePath: path, salt: salt), kind)
        }
        return (KeyRequest(databasePath: path, salt: nil), kind)
    }

    /// A cipher pragma's answer on this connection; for the provider facts, which SQLCipher gives
    /// only on a keyed connection, the process-wide answer when this one is not keyed.
    private func cipherPragma(_ name: String) -> String? {
        guard let connection else { return nil }
        if let value = (try? connection.pragmaText("PRAGMA \(name)")) ?? nil { return value }
        return SQLCipherRuntime.providerFacts[name]
    }

    /// Hands key bytes to `sqlite3_key_v2`, enforcing the keying rules.
    func applyKey(_ key: SecureBytes) throws {
        // After a failed setKey(using:) on a new file the refused statements may still have counted as
        // page reads (SQLite 3.46): a fresh connection, on a file nothing was written to, keys cleanly.
        // The key is checked before that reopen, and the new connection keeps the lockout until it is keyed:
        // a key that is refused below must not leave a connection that writes plaintext.
        guard !key.isEmpty else {
            throw FMDatabaseError.misuse("An empty key was given: the database would not be encrypted.")
        }
        if appliedKey == nil, connection?.keyIsRequired == true {
            try reopenConnection(key: nil)
            connection?.requireKey()
        }
        let connection = try requireConnection()
        guard connection.isAutocommit else {
            throw FMDatabaseError.misuse(
                "Cannot key a connection inside a transaction: temporary data could not be kept in memory. "
                    + "Key it right after open().")
        }
        if appliedKey == nil, !connection.isKeyed {
            try connection.refuseForeignSchemas(
                "Cannot key a connection that has other databases attached: they were attached without a key "
                    + "and would receive data in plaintext. Detach them first, or key right after open().")
        }
        if let current = appliedKey {
            if current.isEqual(to: key) { return }
            if connection.hasTouchedPages {
                throw FMDatabaseError.misuse(
                    "This connection was keyed and has used the database: keying it again with a different key "
                        + "would corrupt the file (SQLCipher 3.4.1). Use rekey to change the key, or open a new connection."
                )
            }
        } else if connection.hasTouchedPages {
            throw FMDatabaseError.misuse(
                "This connection has already read the database without a key: key it right after open(), "
                    + "before any other statement."
            )
        }
        try connection.key(key)
        appliedKey = key
        // Keyed rules first (SQL text may not change the key, the cipher or temp_store: Core/KeyedAuthorizer.swift),
        // then temporary tables and sort files in memory, which would otherwise go to disk unencrypted.
        connection.markKeyed()
        try connection.keepTemporaryDataInMemory()
    }

    /// Reads the schema, so a wrong key fails now with SQLITE_NOTADB.
    func verifyKey(on connection: Connection) throws {
        do {
            _ = try connection.pragmaText("SELECT count(*) FROM sqlite_master")
        } catch let error as FMDatabaseError where error.resultCode == SQLITE_NOTADB {
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message: "file is not a database (wrong key, or the file is not an encrypted database)"
            )
        }
    }

    /// Closes and reopens the connection with the same path, flags and VFS, keyed with `key` and the
    /// cipher settings it was keyed with.
    func reopenConnection(key: SecureBytes?) throws {
        let flags = openFlags
        let vfs = openVFS
        let settings = keySettings
        closeConnection()
        try openConnection(flags: flags, vfs: vfs)
        if let key {
            try applyKey(key)
            try requireConnection().applyCipher(
                formatStatements: settings.formatStatements(), pageSize: settings.pageSize,
                kdfIterations: settings.kdfIterations)
            keySettings = settings
            try applyKeyedConnectionDefaults(on: requireConnection())
        }
    }

    /// The settings of a keyed connection whose key works (BENCHMARKS.md "Keyed connection defaults"). Every
    /// page read from disk is authenticated and decrypted, so a page cache miss costs far more than on
    /// a plaintext file: keep more decrypted pages. Run only after the key is known to be right:
    /// `PRAGMA cache_size` reads the schema, which with a wrong key would spoil the connection for
    /// another try.
    func applyKeyedConnectionDefaults(on connection: Connection) throws {
        try connection.execute("PRAGMA cache_size = -\(Self.keyedConnectionCacheSizeKiB)")
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
        guard let oldKey = appliedKey else {
            throw FMDatabaseError.misuse(
                "Cannot rekey a database that is not encrypted (or not keyed through FMDB): rekey only changes "
                    + "an existing key. Use sqlcipher_export (fmdb-cipher encrypt) to encrypt a plaintext database."
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
                    newKeyOpens.verdict.error.flatMap { $0.resultCode == SQLITE_NOTADB ? nil : $0 }
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
                code: cause.resultCode == SQLITE_NOTADB ? SQLITE_IOERR : cause.extendedCode,
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
            "\(path) has key slots (\(KeySlotFile.path(forDatabaseAt: path))): a plain rekey would make every slot stop opening it. "
                + "Change a slot with KeySlots.changeSlot, or the data key itself with KeySlots.rotateDataKey."
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
        } catch let error as FMDatabaseError where error.resultCode == SQLITE_BUSY || error.resultCode == SQLITE_LOCKED
        {
            return FMDatabaseError(
                code: SQLITE_BUSY,
                message: "The rekey did not take (the database is locked by another connection)" + suffix)
        } catch let error as FMDatabaseError
            where [SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR].contains(error.resultCode)
        {
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
