import CSQLCipher
import Foundation

/// SQLCipher on one connection: keys, rekeys, and the cipher's facts.
///
/// Key safety on SQLCipher 3.4.1, whose own calls do not report these (API.md):
/// - keying a connection again with a *different* key after it has read or written the file is an
///   error (SQLITE_MISUSE); keying again with the *same* key is a no-op that succeeds;
/// - rekeying inside a transaction or savepoint, with open result sets, or a plaintext database is
///   an error (SQLITE_MISUSE);
/// - a rekey that did not take (another connection holds a lock) is an error (SQLITE_BUSY), and the
///   connection is reopened with the old key so it never writes under a half-applied key.
///
/// Keys reach SQLCipher only through `sqlite3_key_v2`/`sqlite3_rekey_v2`, never as SQL text, so no
/// trace or log line shows one. Every keyed connection runs `PRAGMA temp_store = MEMORY`; one keyed
/// through `setKey(using:)` also `PRAGMA cache_size = -8192` (`keyedConnectionCacheSizeKiB`).
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
    /// - Returns: false on error; the database then still opens with the old key.
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
    /// wrong key the connection is reopened unkeyed, so another key can be tried.
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
        try recordingThrows {
            try settings.validate()
            let connection = try requireConnection()
            let (request, kind) = keyRequest()
            let key = try provider.key(for: request).validated()
            try applyKey(key.sqlcipherKeyBytes())
            if let pageSize = settings.pageSize { try connection.execute("PRAGMA cipher_page_size = \(pageSize)") }
            if let iterations = settings.kdfIterations { try connection.execute("PRAGMA kdf_iter = \(iterations)") }
            do {
                try verifyKey(on: connection)
            } catch let error as FMDatabaseError {
                if isFileBacked { try? reopenConnection(key: nil) }
                throw error
            }
            try applyKeyedConnectionDefaults(on: connection)
            // Any key "works" on an empty file, which SQLCipher creates on the first write. Write the
            // first page now, so the salt the key was made for is on disk before another connection
            // (of a pool, say) asks for a key for this file.
            if kind == .empty, (openFlags & SQLITE_OPEN_READONLY) == 0 {
                try connection.execute("PRAGMA user_version = 0")
            }
        }
    }

    /// Changes the key to the one `provider` gives for this file, with the safety rules above.
    public func rekey(using provider: any KeyProvider) throws {
        try recordingThrows {
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

    /// SQLCipher's version (`PRAGMA cipher_version`), e.g. "3.4.1"; nil when not open.
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

    private func recordingBool(_ body: () throws -> Void) -> Bool {
        lastErrorValue = nil
        do {
            try body()
            return true
        } catch {
            return record(error)
        }
    }

    func recordingThrows(_ body: () throws -> Void) throws {
        lastErrorValue = nil
        do {
            try body()
        } catch {
            record(error)
            throw error
        }
    }

    /// Hands key bytes to `sqlite3_key_v2`, enforcing the keying rules.
    func applyKey(_ key: SecureBytes) throws {
        let connection = try requireConnection()
        guard !key.isEmpty else {
            throw FMDatabaseError.misuse("An empty key was given: the database would not be encrypted.")
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
        guard let db = connection.handle else { throw FMDatabaseError.closed() }
        let rc = key.withUnsafeBytes { bytes in
            sqlite3_key_v2(db, "main", bytes.baseAddress, Int32(clamping: bytes.count))
        }
        try connection.check(rc)
        appliedKey = key
        // Temporary tables and sort files would otherwise be written to disk unencrypted.
        try connection.execute("PRAGMA temp_store = MEMORY")
        connection.installKeyedAuthorizer()
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

    /// Closes and reopens the connection with the same path, flags and VFS, keyed with `key`.
    func reopenConnection(key: SecureBytes?) throws {
        let flags = openFlags
        let vfs = openVFS
        closeConnection()
        try openConnection(flags: flags, vfs: vfs)
        if let key { try applyKey(key) }
    }

    /// The settings of a keyed connection whose key works (README "Keyed connection defaults"). Every
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
            throw FMDatabaseError.misuse("Cannot rekey a plaintext database: use sqlcipher_export (fmdb-cipher encrypt).")
        }
        if let db = connection.handle, sqlite3_db_readonly(db, "main") == 1 {
            throw FMDatabaseError(code: SQLITE_READONLY, message: "Cannot rekey a read-only database (read-only file, filesystem or open flags).")
        }
        clearCachedStatements()
        // Reading the page count also checks that the current key works.
        let pageCount = Int(try connection.pragmaText("PRAGMA page_count") ?? "0") ?? 0
        let writtenBefore = connection.pagesWritten
        guard let db = connection.handle else { throw FMDatabaseError.closed() }
        let rc = newKey.withUnsafeBytes { bytes in
            sqlite3_rekey_v2(db, "main", bytes.baseAddress, Int32(clamping: bytes.count))
        }
        // sqlite3_rekey_v2 returns OK even when it could not take the write lock: every page is
        // rewritten when it took, so SQLite's written-pages counter tells.
        let took = rc == SQLITE_OK && (pageCount == 0 || connection.pagesWritten > writtenBefore)
        if took {
            appliedKey = newKey
            return
        }
        // SQLCipher may have left the new key as the write key: never write under a half-applied key.
        if isFileBacked {
            try? reopenConnection(key: oldKey)
        } else {
            _ = oldKey.withUnsafeBytes { bytes in
                sqlite3_rekey_v2(db, "main", bytes.baseAddress, Int32(clamping: bytes.count))
            }
        }
        throw rekeyFailure(rc)
    }

    /// Why a rekey did not take, asked of the (reopened) connection: another connection's lock, or a
    /// damaged file that SQLCipher could not read every page of.
    private func rekeyFailure(_ rc: Int32) -> FMDatabaseError {
        let suffix = "; the database still uses the old key."
        if rc != SQLITE_OK {
            return FMDatabaseError(code: rc, message: "The rekey failed (\(FMDatabaseError.defaultMessage(for: rc)))" + suffix)
        }
        guard let connection else {
            return FMDatabaseError(code: SQLITE_ERROR, message: "The rekey did not take" + suffix)
        }
        let savedTimeout = maxBusyRetryTimeInterval
        maxBusyRetryTimeInterval = 0
        defer { maxBusyRetryTimeInterval = savedTimeout }
        do {
            try connection.execute("BEGIN IMMEDIATE")
            try connection.execute("ROLLBACK")
        } catch let error as FMDatabaseError where error.resultCode == SQLITE_BUSY || error.resultCode == SQLITE_LOCKED {
            return FMDatabaseError(code: SQLITE_BUSY, message: "The rekey did not take (the database is locked by another connection)" + suffix)
        } catch let error as FMDatabaseError where [SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR].contains(error.resultCode) {
            return FMDatabaseError(code: error.resultCode, message: "The rekey did not take (\(error.message))" + suffix)
        } catch {
            // Judged below.
        }
        if let check = try? connection.pragmaText("PRAGMA quick_check"), check != "ok" {
            return FMDatabaseError(code: SQLITE_CORRUPT, message: "The rekey did not take: the database is damaged (\(check))" + suffix)
        }
        return FMDatabaseError(code: SQLITE_BUSY, message: "The rekey did not take (the database was locked by another connection)" + suffix)
    }
}

// MARK: - Backup

extension FMDatabase {
    /// Copies this database into `destination` with SQLite's online backup, page by page.
    ///
    /// Refused (SQLITE_MISUSE) unless both are encrypted (keyed through this library) or both are
    /// plaintext: SQLCipher 3.4.1 copies an encrypted database into a plaintext one as **plaintext**, and
    /// a plaintext one into an encrypted one unencrypted. Use `fmdb-cipher decrypt` / `encrypt` (or
    /// `attachDatabase` + `exportContents`) to change encryption. The raw `sqlite3_backup_*` C functions
    /// are not guarded: do not call them on encrypted databases.
    ///
    /// ```swift
    /// try db.backup(to: copy)   // both keyed
    /// ```
    /// Related SQLite documentation: <https://www.sqlite.org/backup.html>
    public func backup(to destination: FMDatabase) throws {
        try recordingThrows {
            let source = try requireConnection()
            guard let destinationConnection = destination.connection, let to = destinationConnection.handle,
                  let from = source.handle else {
                throw FMDatabaseError.closed()
            }
            switch (appliedKey != nil, destination.appliedKey != nil) {
            case (true, false):
                throw FMDatabaseError.misuse(
                    "Backing up an encrypted database into a plaintext one is refused: SQLCipher 3.4.1 would write it "
                        + "in plaintext. Use fmdb-cipher decrypt (sqlcipher_export) to decrypt on purpose."
                )
            case (false, true):
                throw FMDatabaseError.misuse(
                    "Backing up a plaintext database into an encrypted one is refused: SQLCipher 3.4.1 would not encrypt "
                        + "it. Use fmdb-cipher encrypt (sqlcipher_export)."
                )
            default:
                break
            }
            guard let backup = sqlite3_backup_init(to, "main", from, "main") else {
                throw destinationConnection.error()
            }
            var rc: Int32
            var busyWaits = 0
            let maxBusyWaits = max(1, Int(maxBusyRetryTimeInterval * 100))
            repeat {
                rc = sqlite3_backup_step(backup, 256)
                if rc == SQLITE_BUSY || rc == SQLITE_LOCKED {
                    busyWaits += 1
                    if busyWaits > maxBusyWaits { break }
                    sqlite3_sleep(10)
                }
            } while rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED
            let finish = sqlite3_backup_finish(backup)
            if rc != SQLITE_DONE { throw destinationConnection.error(code: rc) }
            try destinationConnection.check(finish)
        }
    }
}
