import CSQLCipher

/// Facts about the linked SQLite library, read once per process.
enum SQLCipherRuntime {
    /// `PRAGMA cipher_version` on a scratch in-memory connection: nil when the linked library is not
    /// SQLCipher (a system libsqlite3 was linked instead, which must never happen).
    static let version: String? = {
        // Before SQLite initializes: without memory statistics, allocations skip a process-wide mutex
        // that every thread would otherwise contend for (pools). Too late when the program already
        // used SQLite through the C API, which is harmless (SQLITE_MISUSE, ignored).
        _ = fmdb_config_memstatus(0)
        guard let connection = Connection.openScratch() else { return nil }
        defer { try? connection.close() }
        return (try? connection.pragmaText("PRAGMA cipher_version")) ?? nil
    }()
}

extension SQLCipherRuntime {
    /// SQLCipher answers `cipher_provider`, `cipher_provider_version` and `cipher_fips_status` only on
    /// a keyed connection. These facts are the same for every connection of the process, so they are
    /// read once from a scratch in-memory connection keyed with a fixed, non-secret raw key (no KDF).
    ///
    /// Not from the scratch connection the provider registration holds: SQLCipher copies the registered
    /// provider into a connection's codec when it is keyed, and that one was keyed before the library's
    /// provider was registered, so it answers with SQLCipher's own ("openssl" and the OpenSSL version
    /// SQLCipher was built against). This one is keyed after registration (or without it, with
    /// `FMDB_CRYPTO_PROVIDER=sqlcipher` or on an unverified version): it answers for the provider every
    /// other keyed connection uses.
    static let providerFacts: [String: String] = {
        CryptoProviderRegistration.ensureRegistered()  // the facts of the provider keyed connections use
        guard let connection = Connection.openScratchKeyed() else { return [:] }
        defer { try? connection.close() }
        var facts: [String: String] = [:]
        for name in ["cipher_provider", "cipher_provider_version", "cipher_fips_status"] {
            if let value = (try? connection.pragmaText("PRAGMA \(name)")) ?? nil { facts[name] = value }
        }
        return facts
    }()
}

extension SQLCipherRuntime {
    /// Whether the linked SQLite counts each statement's re-preparations (`SQLITE_STMTSTATUS_REPREPARE`, SQLite
    /// 3.20 and later: SQLCipher 4.x). SQLite 3.15 (SQLCipher 3.4.1) has no such counter, and its
    /// `sqlite3_stmt_status` would read past the end of its counters for that code: it is not asked there.
    static let countsRepreparations = sqlite3_libversion_number() >= 3_020_000

    /// `SQLITE_STMTSTATUS_REPREPARE`, which SQLite 3.15's header does not define.
    static let statementStatusReprepare: Int32 = 5
}
