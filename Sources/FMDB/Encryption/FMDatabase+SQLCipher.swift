import Foundation

/// SQLCipher on one connection: keys and the cipher's facts (rekeys: `FMDatabase+Rekey.swift`).
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
    /// KDF iteration count needs the same settings to open), then verifies the key. Settings the provider
    /// carries (``KeyProvider/cipherSettings``) fill in those `settings` leaves nil.
    ///
    /// ```swift
    /// try db.setKey(using: PassphraseKeyProvider("p"), settings: CipherSettings(pageSize: 4096))
    /// ```
    public func setKey(using provider: any KeyProvider, settings: CipherSettings) throws {
        let settings = settings.filling(from: provider.cipherSettings)
        try recording {
            // A closed database fails here, before the provider is asked for a key. (After a failed try on
            // a new file, applyKey keys a fresh connection.)
            _ = try requireConnection()
            let (fileRequest, kind) = keyRequest()
            // The settings' salt, when given, is the one SQLCipher keys the file with (PRAGMA cipher_salt): a
            // provider derives over it, on a new file as on an existing one (a file with a plaintext header does
            // not hold its salt).
            let request = settings.keyRequest(fileRequest)
            do {
                try settings.validate(creatingFile: kind?.isNew ?? true)
                // A choice the linked SQLCipher does not have is refused before keying (SQLITE_FORMAT), but for a
                // file with a plaintext header, the SQLCipher 4 check of page 1 says first whether the key is right.
                try refuseUnavailableChoices(settings, provider: provider, path: request.databasePath, kind: kind)
                // Keys, applies the settings and verifies; finds an existing file's format (CipherFormat).
                try keyFindingFormat(using: provider, settings: settings, request: request, kind: kind)
            } catch {
                if (try? connection?.isKeyed()) != true, kind?.isNew ?? true {
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

    /// Throws `SQLITE_FORMAT` for a setting the linked SQLCipher does not have. For an existing file with a
    /// plaintext header (which only SQLCipher 4 writes) on SQLCipher 3, page 1 is checked against SQLCipher 4's
    /// format with the header, salt and algorithms given: the right key gets `SQLITE_FORMAT` saying the key is
    /// right and SQLCipher 4 is needed, anything else `SQLITE_NOTADB`, as a wrong key to any file.
    func refuseUnavailableChoices(
        _ settings: CipherSettings, provider: any KeyProvider, path: String?, kind: DatabaseFile.Kind?
    ) throws {
        do {
            _ = try settings.choiceStatements()
        } catch let error as FMDatabaseError where error.hasCode(.format) {
            guard case .encryptedWithPlaintextHeader = kind, let path, let salt = settings.salt,
                settings.format == nil
            else { throw error }
            throw CipherFormat.unreadableSQLCipher4Error(
                atPath: path, salt: salt, provider: provider, settings: settings, action: "open")
                ?? FMDatabaseError(code: SQLITE_NOTADB)
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
        if connection?.keyIsRequired == true {
            try reopenConnection(key: nil)
            connection?.requireKey()
        }
        let connection = try requireConnection()
        guard connection.isAutocommit else {
            throw FMDatabaseError.misuse(
                "Cannot key a connection inside a transaction: temporary data could not be kept in memory. "
                    + "Key it right after open().")
        }
        // Whether it is keyed is SQLCipher's answer (Connection.isKeyed): a key PRAGMA in SQL text keys it too.
        let keyed = try connection.isKeyed()
        if !keyed {
            try connection.refuseForeignSchemas(
                "Cannot key a connection that has other databases attached: they were attached without a key "
                    + "and would receive data in plaintext. Detach them first, or key right after open().")
        }
        if let current = appliedKey {
            if current.isEqual(to: key) { return }
            if connection.hasTouchedPages {
                throw FMDatabaseError.misuse(
                    "This connection was keyed and has used the database: keying it again with a different key "
                        + "would corrupt the file (SQLCipher 3.4.1). Use rekey to change the key, or open a new "
                        + "connection."
                )
            }
        } else if keyed, connection.hasTouchedPages {
            // Keyed by SQL text: this library does not hold that key, so cannot tell a same key from another.
            throw FMDatabaseError.misuse(
                "This connection was keyed by SQL text (PRAGMA key) and has used the database: keying it again "
                    + "could corrupt the file (SQLCipher 3.4.1). Open a new connection and key it with setKey."
            )
        } else if connection.hasTouchedPages {
            throw FMDatabaseError.misuse(
                "This connection has already read the database without a key: key it right after open(), "
                    + "before any other statement."
            )
        }
        try connection.key(key)
        // Asks SQLCipher that it keyed, then the keyed rules (SQL text may not change the key, the cipher or
        // temp_store: Core/KeyedAuthorizer.swift) and temporary tables and sort files in memory, which would
        // otherwise go to disk unencrypted.
        try connection.adoptKey()
        // Remembered only once SQLCipher confirmed it: a later call with the same key must not skip the above.
        appliedKey = key
    }

    /// Reads the schema, so a wrong key fails now with SQLITE_NOTADB.
    func verifyKey(on connection: Connection, plaintextHeader: Bool = false) throws {
        do {
            try connection.readSchemaVerifyingKey(plaintextHeader: plaintextHeader)
        } catch let error as FMDatabaseError where error.hasCode(.notADatabase) {
            if plaintextHeader { throw error }
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
}
