import CSQLCipher
import Foundation

/// File formats: which SQLCipher format a keyed connection reads, and how `setKey(using:)` finds it.
extension FMDatabase {
    /// The format of the encrypted database on this keyed connection (`.v4`, `.v3`, ...), read from the
    /// cipher settings SQLCipher uses for it; nil when the connection is closed or not keyed (as SQLCipher
    /// says: a connection keyed by `PRAGMA key` in SQL text is keyed too).
    ///
    /// ```swift
    /// try db.setKey(using: PassphraseKeyProvider("p"))
    /// if db.cipherFormat == .v3 { print("an old file: fmdb-cipher migrate converts it") }
    /// ```
    /// - Note: FMDB compatibility: an addition; FMDB has no such property. A file written with custom
    ///   settings is reported by its HMAC and KDF (a SQLCipher 3 file with 4096-byte pages is `.v3`); on
    ///   a raw key SQLCipher 2 and 3 files are the same and are reported as `.v3` unless asked for.
    public var cipherFormat: CipherFormat? {
        guard let connection, (try? connection.isKeyed()) == true else { return nil }
        func pragma(_ name: String) -> String? { (try? connection.pragmaText("PRAGMA \(name)")) ?? nil }
        if SQLCipherRuntime.majorVersion >= 4, let hmac = pragma("cipher_hmac_algorithm"), !hmac.contains("SHA1") {
            return .v4
        }
        if pragma("cipher_use_hmac") == "0" { return .v1 }
        if pragma("kdf_iter") == String(CipherFormat.v2.kdfIterations) { return .v2 }
        return .v3
    }

    /// Keys the connection with `provider`'s key and verifies it, finding an existing file's format:
    /// the format `settings` names, or else the one that matched this file last time in this process,
    /// the linked SQLCipher's default, then the older ones. The common case (a file in the linked default
    /// format) costs one try: one key derivation. On SQLCipher 3.x, when no format matches, page 1 is
    /// checked against SQLCipher 4's format, so the right key to a SQLCipher 4 file gets SQLITE_FORMAT (24)
    /// with a message saying so, and a wrong key SQLITE_NOTADB (26). On failure the connection is reopened
    /// unkeyed, so another key can be tried.
    func keyFindingFormat(
        using provider: any KeyProvider, settings: CipherSettings,
        request: KeyRequest, kind: DatabaseFile.Kind?
    ) throws {
        var salt: Data?
        if case .encrypted(let fileSalt) = kind { salt = fileSalt }
        let candidates: [CipherFormat]
        if let format = settings.format {
            candidates = [format]
        } else if let salt {
            candidates = CipherFormat.candidates(hint: CipherFormatHints.format(forSalt: salt))
        } else {
            candidates = [.linkedDefault]
        }
        var failure: FMDatabaseError?
        for (index, format) in candidates.enumerated() {
            if index > 0 { try reopenConnection(key: nil) }
            let key = try provider.key(
                for: KeyRequest(databasePath: request.databasePath, salt: request.salt, format: format)
            ).validated()
            let keyBytes = key.sqlcipherKeyBytes()
            try keyBytes.requireEmbeddedSalt(matching: settings.salt)
            // Keying again with the same key is a no-op on a used connection: its settings stay as they are.
            let alreadyKeyed = appliedKey.map { $0.isEqual(to: keyBytes) } ?? false
            try applyKey(keyBytes)
            // Asked for after applyKey, which keys a fresh connection after a failed try on a new file.
            let connection = try requireConnection()
            var applied = settings
            applied.format = format
            if !alreadyKeyed {
                try connection.applyCipher(
                    formatStatements: applied.formatStatements(), pageSize: settings.pageSize,
                    kdfIterations: settings.kdfIterations)
            }
            do {
                try verifyKey(on: connection, plaintextHeader: (settings.plaintextHeaderSize ?? 0) > 0)
                keySettings = applied
                if let salt, candidates.count > 1 { CipherFormatHints.remember(format, forSalt: salt) }
                return
            } catch let error as FMDatabaseError where error.hasCode(.notADatabase) {
                failure = error
            } catch {
                if isFileBacked { try? reopenConnection(key: nil) }
                throw error
            }
        }
        if isFileBacked { try? reopenConnection(key: nil) }
        if let salt, let path = request.databasePath,
            let error = CipherFormat.unreadableSQLCipher4Error(
                atPath: path, salt: salt, provider: provider, settings: settings, action: "open")
        {
            throw error
        }
        throw failure ?? FMDatabaseError(code: SQLITE_NOTADB)
    }
}
