import CSQLCipher
import Foundation

/// Cipher settings for a database this connection writes through `attachDatabase` (export, encrypt).
///
/// SQLCipher 3.4.1 defaults: 1024-byte pages, PBKDF2 64,000 iterations, HMAC-SHA1 per page.
///
/// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/>
public struct CipherSettings: Sendable, Equatable {
    /// `PRAGMA cipher_page_size`: 512 to 65,536, a power of two. The `sqlcipher` shell then needs the same
    /// `PRAGMA cipher_page_size` after `PRAGMA key`.
    public var pageSize: Int?
    /// `PRAGMA kdf_iter`: the iterations of SQLCipher's own KDF (passphrase keys only).
    public var kdfIterations: Int?
    /// The file format (`PRAGMA cipher_compatibility` on SQLCipher 4): nil writes new files in the linked
    /// SQLCipher's default format and finds an existing file's format; a format is used as given (the
    /// page size and KDF iterations above then adjust it).
    public var format: CipherFormat?

    /// Settings; nil keeps SQLCipher's default.
    public init(pageSize: Int? = nil, kdfIterations: Int? = nil, format: CipherFormat? = nil) {
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
        self.format = format
    }

    /// Throws for settings SQLCipher would reject or silently ignore.
    public func validate() throws {
        if let pageSize, pageSize < 512 || pageSize > 65_536 || pageSize & (pageSize - 1) != 0 {
            throw FMDatabaseError.misuse("The cipher page size must be a power of two from 512 to 65536 (got \(pageSize)).")
        }
        if let kdfIterations, kdfIterations < 1 {
            throw FMDatabaseError.misuse("kdf_iter must be positive (got \(kdfIterations)).")
        }
    }
}

/// Exporting between plaintext and encrypted databases, with keys that never appear in SQL text.
extension FMDatabase {
    /// Attaches the database file at `path` as `schema`, keyed with `keyProvider` through
    /// `sqlite3_key_v2` (no key in SQL text; nil: a plaintext database), with `settings` applied.
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
        lastErrorValue = nil
        do {
            try settings.validate()
            let connection = try requireConnection()
            let name = try Self.validatedSchemaName(schema)
            let request = Self.keyRequest(forFileAt: path).request
            let format = settings.format ?? .linkedDefault
            let key = try keyProvider.map {
                try $0.key(for: KeyRequest(databasePath: path, salt: request.salt, format: format)).validated()
            }
            let formatStatements = try keyProvider == nil ? [] : format.selectionStatements(schema: name)
            // KEY '' attaches it without a codec: an empty key is not a secret, and it stops SQLCipher from
            // giving the new database the main database's key.
            try update("ATTACH DATABASE ? AS \(name) KEY ''") { try $0.bind(array: [path], dateFormatter: nil) }
            if let key {
                do {
                    guard let db = connection.handle else { throw FMDatabaseError.closed() }
                    let rc = key.sqlcipherKeyBytes().withUnsafeBytes { bytes in
                        sqlite3_key_v2(db, name, bytes.baseAddress, Int32(clamping: bytes.count))
                    }
                    try connection.check(rc)
                    for statement in formatStatements { try connection.execute(statement) }
                    if let pageSize = settings.pageSize { try connection.execute("PRAGMA \(name).cipher_page_size = \(pageSize)") }
                    if let iterations = settings.kdfIterations { try connection.execute("PRAGMA \(name).kdf_iter = \(iterations)") }
                    // Reading the schema verifies the key for an existing file.
                    _ = try connection.pragmaText("SELECT count(*) FROM \(name).sqlite_master")
                } catch {
                    try? update("DETACH DATABASE \(name)") { _ in }
                    throw error
                }
            }
        } catch {
            record(error)
            throw error
        }
    }

    /// Detaches a database attached with `attachDatabase(atPath:schema:keyProvider:settings:)`.
    public func detachDatabase(schema: String) throws {
        lastErrorValue = nil
        do {
            let name = try Self.validatedSchemaName(schema)
            try update("DETACH DATABASE \(name)") { _ in }
        } catch {
            record(error)
            throw error
        }
    }

    /// Copies every table, index, view, trigger and row of `main` into the attached `schema`
    /// (`sqlcipher_export`), and the `user_version` and `application_id` it does not copy.
    public func exportContents(to schema: String) throws {
        lastErrorValue = nil
        do {
            let connection = try requireConnection()
            let name = try Self.validatedSchemaName(schema)
            do {
                _ = try connection.pragmaText("SELECT sqlcipher_export('\(name)')")
            } catch let error as FMDatabaseError {
                // sqlcipher_export reports every failure as SQLITE_ERROR with the inner error's text:
                // give back the inner code when the text is SQLite's own for one (disk full, read-only...).
                throw FMDatabaseError(code: Self.resultCode(forMessage: error.message) ?? error.extendedCode,
                                      message: error.message, sql: error.sql)
            }
            let userVersion = try connection.pragmaText("PRAGMA main.user_version") ?? "0"
            let applicationID = try connection.pragmaText("PRAGMA main.application_id") ?? "0"
            try connection.execute("PRAGMA \(name).user_version = \(Int64(userVersion) ?? 0)")
            try connection.execute("PRAGMA \(name).application_id = \(Int64(applicationID) ?? 0)")
        } catch {
            record(error)
            throw error
        }
    }

    /// The primary result code whose standard text is `message` ("database or disk is full" → SQLITE_FULL).
    static func resultCode(forMessage message: String) -> Int32? {
        for code in Int32(2)...28 where FMDatabaseError.defaultMessage(for: code) == message {
            return code
        }
        return nil
    }

    /// Schema names are pasted into SQL (they cannot be bound): letters, digits and underscores only.
    static func validatedSchemaName(_ name: String) throws -> String {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
        guard allowed, let first = name.utf8.first, !(first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")),
              name.lowercased() != "main", name.lowercased() != "temp" else {
            throw FMDatabaseError.misuse("A schema name must be a plain identifier other than main or temp (got '\(name)').")
        }
        return name
    }

    // MARK: - Scripts

    /// Runs every statement of `script` in order, handing each one's result set to `body` before the
    /// next statement is compiled (so later statements may use what earlier ones created). `body` steps
    /// the result set as it likes; statements that return no rows are stepped to completion after it.
    ///
    /// ```swift
    /// try db.executeScript("CREATE TABLE t (a); INSERT INTO t VALUES (1); SELECT a FROM t") { rs in
    ///     while rs.next() { print(rs.int(forColumnIndex: 0)) }
    /// }
    /// ```
    public func executeScript(_ script: String, _ body: (FMResultSet) throws -> Void) throws {
        lastErrorValue = nil
        do {
            let connection = try requireConnection(sql: script)
            let bytes = Array(script.utf8)
            var offset = 0
            while offset < bytes.count {
                guard let (statement, consumed) = try connection.prepare(bytes, from: offset) else { break }
                offset += consumed
                if traceExecution { logger.info("\(databasePath ?? ":memory:") executeScript: \(statement.sql)") }
                statement.inUse = true
                let rs = FMResultSet(statement: statement, parent: self)
                try body(rs)
                if rs.currentStatement != nil {
                    while try rs.nextWithError() {}
                }
                rs.close()
            }
        } catch {
            record(error)
            throw error
        }
    }
}
