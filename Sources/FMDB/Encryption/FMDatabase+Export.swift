import Foundation

/// Exporting between plaintext and encrypted databases, with keys that never appear in SQL text.
extension FMDatabase {
    /// Attaches the database file at `path` as `schema`, keyed with `keyProvider` (nil: a plaintext
    /// database), with `settings` applied (those it leaves nil filled in from `keyProvider`'s
    /// ``KeyProvider/cipherSettings``); the key never appears in SQL text.
    ///
    /// A new file is attached, then keyed through `sqlite3_key_v2`, and `settings` apply to it. An existing
    /// encrypted file is read by SQLite inside ATTACH, so its key is ATTACH's bound `KEY` argument, and it
    /// must be in the linked SQLCipher's default format and settings (SQLCipher reads an attached file
    /// with its process-wide defaults, which this library never changes: every other database keyed in
    /// the process at that moment would get them). A wrong key throws `SQLITE_NOTADB` (26); the right key
    /// to a file in another format or with custom settings throws `SQLITE_FORMAT` (24) saying what it
    /// needs (open such a file with its own ``FMDatabase``, or convert it with `fmdb-cipher migrate`).
    /// Either way nothing stays attached.
    ///
    /// ```swift
    /// try db.attachDatabase(
    ///     atPath: "/data/archive.db", schema: "archive", keyProvider: PassphraseKeyProvider("archive key"))
    /// let rows = db.executeQuery("SELECT * FROM main.t JOIN archive.t USING (id)")
    /// ```
    ///
    /// ```swift
    /// try db.attachDatabase(atPath: "/tmp/copy.db", schema: "encrypted", keyProvider: PassphraseKeyProvider("k"))
    /// try db.exportContents(to: "encrypted")
    /// try db.detachDatabase(schema: "encrypted")
    /// ```
    /// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#sqlcipher_export>
    public func attachDatabase(
        atPath path: String,
        schema: String,
        keyProvider: (any KeyProvider)?,
        settings: CipherSettings = CipherSettings()
    ) throws {
        let settings = settings.filling(from: keyProvider?.cipherSettings)
        try recording {
            let (request, kind) = Self.keyRequest(forFileAt: path)
            try settings.validate(creatingFile: keyProvider != nil && kind.isNew)
            let connection = try requireConnection()
            let name = try Self.validatedSchemaName(schema)
            if let keyProvider, case .encrypted(let salt) = kind {
                try attachExisting(atPath: path, schema: name, salt: salt, keyProvider: keyProvider, settings: settings)
                // Keyed, as SQLCipher says: SQL text on this connection may no longer change keys or cipher
                // settings (KeyedAuthorizer), and temporary data stays in memory.
                do {
                    try connection.adoptKey(schema: name)
                } catch {
                    try? update("DETACH DATABASE \(name)") { _ in }
                    throw error
                }
                return
            }
            let format = settings.format ?? .linkedDefault
            let key = try keyProvider.map {
                try $0.key(
                    for: settings.keyRequest(KeyRequest(databasePath: path, salt: request.salt, format: format))
                ).validated()
            }
            let formatStatements =
                try keyProvider == nil
                ? [] : format.selectionStatements(schema: name) + settings.choiceStatements(schema: name)
            // KEY '' attaches it without a codec: an empty key is not a secret, and it stops SQLCipher from
            // giving the new database the main database's key.
            try connection.runningLibraryStatements {
                try update("ATTACH DATABASE ? AS \(name) KEY ''") { try $0.bind(array: [path], dateFormatter: nil) }
            }
            if let key {
                do {
                    try key.sqlcipherKeyBytes().requireEmbeddedSalt(matching: settings.salt)
                    try connection.key(key.sqlcipherKeyBytes(), schema: name)
                    // Keyed, as SQLCipher says: SQL text on this connection may no longer change keys or cipher
                    // settings (KeyedAuthorizer), and temporary data stays in memory, as on a keyed main database.
                    try connection.adoptKey(schema: name)
                    try connection.applyCipher(
                        formatStatements: formatStatements, pageSize: settings.pageSize,
                        kdfIterations: settings.kdfIterations, schema: name)
                    // Reading the schema verifies the key for an existing file.
                    _ = try connection.runningLibraryStatements {
                        try connection.pragmaText("SELECT count(*) FROM \(name).sqlite_master")
                    }
                } catch {
                    try? update("DETACH DATABASE \(name)") { _ in }
                    throw error
                }
            }
        }
    }

    /// Attaches an existing encrypted file. SQLite reads its schema inside ATTACH, with the codec's
    /// settings at that moment: SQLCipher's defaults, since per-schema PRAGMAs can only come after. So a
    /// file in the linked default format and settings attaches; for any other, the file itself is asked
    /// on a separate read-only connection (one KDF per format tried, on this failure path only), so the
    /// error says what is wrong: the right key to a file that needs other settings is `SQLITE_FORMAT`
    /// with a message saying how to read it, anything else `SQLITE_NOTADB`.
    private func attachExisting(
        atPath path: String, schema name: String, salt: Data,
        keyProvider: any KeyProvider, settings: CipherSettings
    ) throws {
        let connection = try requireConnection()
        let linked = CipherFormat.linkedDefault
        let inDefaults =
            (settings.format ?? linked) == linked
            && (settings.pageSize ?? linked.pageSize) == linked.pageSize
            && (settings.kdfIterations ?? linked.kdfIterations) == linked.kdfIterations && !settings.makesChoices
        var failure: FMDatabaseError?
        if inDefaults {
            let key = try keyProvider.key(for: KeyRequest(databasePath: path, salt: salt, format: linked)).validated()
            do {
                try connection.attachEncrypted(path: path, schema: name, key: key.sqlcipherKeyBytes())
                return
            } catch let error as FMDatabaseError where error.hasCode(.notADatabase) {
                failure = error
            }
        }
        let candidates =
            settings.format.map { [$0] } ?? CipherFormat.candidates(hint: CipherFormatHints.format(forSalt: salt))
        for format in candidates where !(inDefaults && format == linked) {
            let key = try keyProvider.key(
                for: settings.keyRequest(KeyRequest(databasePath: path, salt: salt, format: format))
            ).validated()
            let probe = Connection.probeKey(
                key.sqlcipherKeyBytes(), path: path, flags: SQLITE_OPEN_READONLY, vfs: openVFS,
                formatStatements: try format.selectionStatements() + settings.choiceStatements(),
                pageSize: settings.pageSize,
                kdfIterations: settings.kdfIterations, busyTimeout: keyProbeBusyTimeout)
            switch probe {
            case .opens:
                throw FMDatabaseError(
                    code: SQLITE_FORMAT, message: Self.attachNeedsOtherSettings(format: format, settings: settings))
            case .locked:
                throw FMDatabaseError(code: SQLITE_BUSY, message: "\(path) stayed locked by another connection.")
            case .doesNotOpen, .couldNotCheck:
                // Another format is tried; the error below says what the linked format met.
                continue
            }
        }
        if let error = CipherFormat.unreadableSQLCipher4Error(
            atPath: path, salt: salt, provider: keyProvider, settings: settings, action: "attach")
        {
            throw error
        }
        throw failure ?? FMDatabaseError(code: SQLITE_NOTADB)
    }

    /// Why a file the key opens cannot be attached, and what to do instead.
    static func attachNeedsOtherSettings(format: CipherFormat, settings: CipherSettings) -> String {
        var needs = ["format \(format.rawValue)"]
        if let pageSize = settings.pageSize { needs.append("cipher_page_size \(pageSize)") }
        if let iterations = settings.kdfIterations { needs.append("kdf_iter \(iterations)") }
        if let algorithm = settings.hmacAlgorithm { needs.append("cipher_hmac_algorithm \(algorithm.rawValue)") }
        if let algorithm = settings.kdfAlgorithm { needs.append("cipher_kdf_algorithm \(algorithm.rawValue)") }
        if let usesHMAC = settings.usesHMAC { needs.append("cipher_use_hmac \(usesHMAC ? "ON" : "OFF")") }
        if let size = settings.plaintextHeaderSize { needs.append("cipher_plaintext_header_size \(size)") }
        if settings.salt != nil { needs.append("cipher_salt") }
        return
            "The key opens this file, but it needs cipher settings other than SQLCipher's defaults "
            + "(\(needs.joined(separator: ", "))), and SQLite reads an attached file before any per-database setting "
            + "can apply; changing SQLCipher's process-wide defaults for the moment would also change every other "
            + "database keyed in the process at that moment, so this library does not. Open the file with its own "
            + "FMDatabase and setKey(using:settings:), or convert it to the linked default format first (fmdb-cipher "
            + "migrate, or export without --new-cipher-page-size/--new-kdf-iter)."
    }

    /// Detaches a database attached with `attachDatabase(atPath:schema:keyProvider:settings:)`.
    public func detachDatabase(schema: String) throws {
        try recording {
            let name = try Self.validatedSchemaName(schema)
            try update("DETACH DATABASE \(name)") { _ in }
        }
    }

    /// Copies every table, index, view, trigger and row of `main` into the attached `schema`
    /// (`sqlcipher_export`), and the `user_version` and `application_id` it does not copy.
    public func exportContents(to schema: String) throws {
        try recording {
            let connection = try requireConnection()
            let name = try Self.validatedSchemaName(schema)
            errno = 0
            do {
                _ = try connection.runningLibraryStatements {
                    try connection.pragmaText("SELECT sqlcipher_export('\(name)')")
                }
            } catch let error as FMDatabaseError {
                let systemError = errno
                // sqlcipher_export reports every failure as SQLITE_ERROR with the inner error's text: the
                // code is found from the files instead. The destination's state tells a read-only or failing
                // filesystem; a full disk leaves no errno there (SQLite's VFS clears it for ENOSPC), so it
                // is told by the space: less free than the source occupies means the copy cannot fit.
                // A failed write's errno (a journal's file is closed by now, its own record gone), then the
                // inner error's text, which is SQLite's standard wording for its code.
                var code =
                    connection.fileErrorCode(schema: name)
                    ?? FileSystem.resultCode(forSystemError: systemError)
                    ?? Self.resultCode(forSQLiteMessage: error.message)
                    ?? error.extendedCode
                if code == SQLITE_ERROR, let source = connection.fileName(schema: "main"),
                    let destination = connection.fileName(schema: name),
                    DatabaseFile.lacksSpace(toCopy: source, into: destination)
                {
                    code = SQLITE_FULL
                }
                throw FMDatabaseError(code: code, message: error.message, sql: error.sql)
            }
            let userVersion = try connection.pragmaText("PRAGMA main.user_version") ?? "0"
            let applicationID = try connection.pragmaText("PRAGMA main.application_id") ?? "0"
            try connection.execute("PRAGMA \(name).user_version = \(Int64(userVersion) ?? 0)")
            try connection.execute("PRAGMA \(name).application_id = \(Int64(applicationID) ?? 0)")
        }
    }

    /// The result code behind SQLite's standard message for it (`sqlite3_errstr`), which is all an SQL
    /// function's failure carries; nil for any other text.
    static func resultCode(forSQLiteMessage message: String) -> Int32? {
        for code in [
            SQLITE_IOERR, SQLITE_FULL, SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_NOMEM, SQLITE_CORRUPT, SQLITE_NOTADB,
        ]
        where message == FMDatabaseError.defaultMessage(for: code) {
            return code
        }
        return nil
    }

    /// Schema names are pasted into SQL (they cannot be bound): letters, digits and underscores only.
    static func validatedSchemaName(_ name: String) throws -> String {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
        guard allowed, let first = name.utf8.first, !(first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")),
            name.lowercased() != "main", name.lowercased() != "temp"
        else {
            throw FMDatabaseError.misuse(
                "A schema name must be a plain identifier other than main or temp (got '\(name)').")
        }
        return name
    }
}
