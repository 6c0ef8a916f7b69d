internal import CFMDBCrypto
import CSQLCipher
import Foundation
import Logging

/// Registers FMDBCipher's crypto provider with SQLCipher (BENCHMARKS.md "SQLCipher crypto provider"), once per
/// process, before the library keys its first connection.
///
/// SQLCipher copies the registered provider into every codec context it creates, so the provider must be
/// in place before a connection is keyed, and must stay: when the last keyed connection closes, SQLCipher
/// frees the registered provider and installs its OpenSSL one again at the next activation (3.4.1:
/// `sqlcipher_deactivate` in src/crypto_impl.c; 4.6.1: the static `sqlcipher_deactivate` in
/// src/sqlcipher.c, which also frees the provider mutex `sqlcipher_register_provider` takes). So the
/// registration first opens a scratch in-memory connection keyed with a fixed, non-secret raw key (one
/// activation, which creates the mutexes and installs SQLCipher's provider), then registers ours, and keeps
/// that connection open for the life of the process: the activation count never returns to zero.
///
/// The provider struct's layout differs between SQLCipher lines, and a wrong layout is memory corruption,
/// so registration happens only for runtime versions whose layout was checked against their sources.
enum CryptoProviderRegistration {
    /// True when the library's provider is registered for this process. The first read registers it
    /// (thread-safe: Swift runs a static initializer once).
    static let isActive: Bool = register()

    /// The scratch keyed connection that holds SQLCipher's activation for the process. Written once, inside
    /// `isActive`'s initializer (which Swift runs once, under its own lock), never read: it only keeps the
    /// connection open and reachable (so leak checkers do not report it).
    nonisolated(unsafe) private static var activation: Connection?

    /// Whether the library's provider is requested (`FMDatabase.cryptoProvider == .library`) rather than
    /// SQLCipher's own: the environment's choice (`FMDB_CRYPTO_PROVIDER=sqlcipher` asks for SQLCipher's)
    /// until a program sets `FMDatabase.cryptoProvider`. The first registration reads it. (`getenv` reads the
    /// one variable; `ProcessInfo.environment` would build a dictionary of all of them, ~2.5 million
    /// instructions at the first keyed open.)
    static let isLibraryProviderRequested = Protected<Bool>(
        getenv("FMDB_CRYPTO_PROVIDER").map { String(cString: $0) } != "sqlcipher")

    /// Call before keying a connection.
    @inline(__always)
    static func ensureRegistered() {
        _ = isActive
    }

    /// The provider layout for a `PRAGMA cipher_version` answer, or nil when that version's layout was not
    /// verified from source (SQLCipher's own provider then stays in place). Verified: 3.4.1 (Debian 12,
    /// Ubuntu 22.04); 4.5.1 to 4.6.1 (Ubuntu 24.04's 4.5.6; Debian 13's and bookworm-backports' 4.6.1),
    /// whose `sqlcipher_provider` (src/sqlcipher.h), `sqlcipher_register_provider` and activation life
    /// cycle (src/crypto_impl.c, then src/sqlcipher.c) are the same as 4.6.1's; and 4.19.0 (Debian
    /// unstable's), whose provider has 4.7's layout: `init`/`shutdown` instead of the activation pair, a
    /// `next` pointer, and a process-wide life cycle (SQLCipher starts with `sqlite3_initialize`, keeps
    /// every registered provider until `sqlite3_shutdown`, and never frees one when a connection closes).
    /// Other 4.7 and later releases are not listed until their sources are compared the same way.
    static func layout(forCipherVersion version: String?) -> Int32? {
        guard let version else { return nil }
        if version == "3.4.1" { return Int32(FMDB_CRYPTO_LAYOUT_SQLCIPHER_3_4_1.rawValue) }
        if verifiedAs4_6_1.contains(version) { return Int32(FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_6_1.rawValue) }
        if verifiedAs4_7.contains(version) { return Int32(FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_7.rawValue) }
        return nil
    }

    /// The community releases whose provider interface is 4.6.1's (see `layout(forCipherVersion:)`).
    private static let verifiedAs4_6_1: Set<String> = Set(
        ["4.5.1", "4.5.2", "4.5.3", "4.5.4", "4.5.5", "4.5.6", "4.5.7", "4.6.0", "4.6.1"].map { $0 + " community" })

    /// The community releases whose provider interface is 4.7's, compared with the sources.
    private static let verifiedAs4_7: Set<String> = ["4.19.0 community"]

    /// How many cipher and HMAC contexts the provider has created in this process (a test hook: with
    /// context reuse it grows with connections, not with pages).
    static var contextsCreated: UInt {
        UInt(fmdb_crypto_contexts_created())
    }

    /// How many failed OpenSSL calls in the provider left entries in OpenSSL's error queue, which the provider
    /// empties, reporting each entry (`OpenSSLErrors.report`): a diagnosis and test hook.
    static var openSSLFailures: UInt {
        UInt(fmdb_crypto_openssl_failures())
    }

    private static func register() -> Bool {
        // The provider reports the OpenSSL errors it drains through the library's logger, as SQLCipher's
        // own provider logs them.
        fmdb_crypto_set_error_reporter { function, text in
            OpenSSLErrors.report(
                function: function.map { String(cString: $0) } ?? "the crypto provider",
                text: text.map { String(cString: $0) } ?? "")
        }
        let version = SQLCipherRuntime.version ?? "unknown"
        guard isLibraryProviderRequested.withLock({ $0 }) else {
            report("SQLCipher's own, as FMDB_CRYPTO_PROVIDER or FMDatabase.cryptoProvider asked", version: version)
            return false
        }
        guard let layout = layout(forCipherVersion: SQLCipherRuntime.version) else {
            report(
                "SQLCipher's own: the library's provider interface was not verified for this version", version: version)
            return false
        }
        guard let connection = Connection.openScratchKeyed(registeringCryptoProvider: false) else {
            report("SQLCipher's own: no scratch connection to register the library's provider", version: version)
            return false
        }
        guard fmdb_crypto_register(layout) == 0 else {
            try? connection.close()
            report("SQLCipher's own: registering the library's provider failed", version: version)
            return false
        }
        // Held for the process on purpose: its activation keeps the registered provider in place.
        activation = connection
        report("the library's (fmdbcipher-openssl)", version: version)
        return true
    }

    /// Says once per process, at debug level, which crypto provider keyed connections use.
    private static func report(_ provider: String, version: String) {
        Logger(label: "fmdb").debug("Crypto provider on SQLCipher \(version): \(provider)")
    }
}
