import CFMDBCryptoSelfTest
@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// FMDBCipher's SQLCipher crypto provider (BENCHMARKS.md "SQLCipher crypto provider"): registered by default on
/// the SQLCipher versions whose provider layout was verified, byte-compatible with SQLCipher's own
/// OpenSSL provider both ways (the `sqlcipher` shell of the same line runs SQLCipher's provider), and
/// reusing its contexts across pages.
final class CryptoProviderTests: FMDBCipherTestCase {
    static let ours = "fmdbcipher-openssl"

    /// Skips where the library leaves SQLCipher's provider in place by design (an unverified version, or
    /// the opt-out set in the environment of the whole run).
    func requireOurProvider() throws {
        guard FMDatabase.cryptoProvider == .library else { throw XCTSkip("FMDB_CRYPTO_PROVIDER=sqlcipher is set") }
        guard CryptoProviderRegistration.layout(forCipherVersion: SQLCipherRuntime.version) != nil else {
            throw XCTSkip("SQLCipher \(SQLCipherRuntime.version ?? "?"): provider layout not verified")
        }
    }

    func shell() throws -> String {
        try lineShell()
    }

    /// A keyed file of several hundred pages (rows of 200-byte blobs), made here.
    func makeDatabase(_ name: String, key: String, rows: Int = 2_000) throws -> String {
        try makeKeyedDatabase(name, provider: PassphraseKeyProvider(key)) { db in
            XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text, b blob)"))
            XCTAssertTrue(db.beginTransaction())
            for i in 0..<rows {
                XCTAssertTrue(
                    db.executeUpdate(
                        "insert into t values (?, ?, ?)", i, "row \(i)", Data(repeating: UInt8(i % 251), count: 200)))
            }
            XCTAssertTrue(db.commit())
        }
    }

    func testOurProviderIsActiveByDefaultAndAnswersAsSQLCipherDoes() throws {
        try requireOurProvider()
        XCTAssertTrue(CryptoProviderRegistration.isActive)
        let path = try makeDatabase("facts.db", key: "facts")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("facts"))
        XCTAssertEqual(db.cipherProvider, Self.ours)
        XCTAssertEqual(db.cipherProviderVersion, db.string(forQuery: "PRAGMA cipher_provider_version"))
        XCTAssertEqual(db.cipherFipsStatus, "0")
        // What PRAGMAs answer through the provider's sizes and names equals what SQLCipher's own says
        // (the shell) for the same file.
        let pragmas =
            ["cipher_page_size", "kdf_iter", "cipher_use_hmac"]
            + (SQLCipherRuntime.majorVersion == 3 ? ["cipher"] : ["cipher_hmac_algorithm", "cipher_kdf_algorithm"])
        var ourAnswers: [String] = []
        for pragma in pragmas { ourAnswers.append(db.string(forQuery: "PRAGMA \(pragma)") ?? "nil") }
        db.close()
        let script = "PRAGMA key = 'facts';\n" + pragmas.map { "PRAGMA \($0);" }.joined(separator: "\n") + "\n"
        let theirs = try runSQLCipherShell(try shell(), path, script)
        XCTAssertEqual(theirs.status, 0, theirs.stderr)
        XCTAssertEqual(theirs.stdout.split(separator: "\n").map(String.init), ourAnswers)
    }

    func testAFileWrittenWithOurProviderOpensWithSQLCiphersAndBack() throws {
        try requireOurProvider()
        let shell = try shell()
        // Ours writes (SQLCipher's passphrase KDF through our kdf, then every page through our cipher and
        // HMAC); SQLCipher's provider in the shell reads every page.
        let path = try makeDatabase("ours.db", key: "written here")
        var result = try runSQLCipherShell(
            shell, path,
            """
            PRAGMA key = 'written here';
            PRAGMA integrity_check;
            SELECT count(*), sum(length(b)), max(v) FROM t;
            """)
        XCTAssertEqual(result.stdout, "ok\n2000|400000|row 999\n", result.stderr)

        // SQLCipher's provider writes more pages and rekeys; ours reads every page and rekeys back.
        result = try runSQLCipherShell(
            shell, path,
            """
            PRAGMA key = 'written here';
            INSERT INTO t SELECT id + 2000, 'shell ' || id, randomblob(300) FROM t;
            PRAGMA rekey = 'rekeyed by the shell';
            """)
        XCTAssertEqual(result.status, 0, result.stderr)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("rekeyed by the shell"))
        XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok")
        XCTAssertEqual(db.int(forQuery: "select count(*) from t where v like 'shell %'"), 2_000)
        XCTAssertEqual(db.cipherProvider, Self.ours)
        XCTAssertTrue(db.rekey("rekeyed here"))
        XCTAssertTrue(db.close())

        result = try runSQLCipherShell(
            shell, path,
            """
            PRAGMA key = 'rekeyed here';
            PRAGMA integrity_check;
            SELECT count(*) FROM t;
            """)
        XCTAssertEqual(result.stdout, "ok\n4000\n", result.stderr)
    }

    func testARawKeyFileIsByteCompatibleWithTheShell() throws {
        try requireOurProvider()
        let hex = String(repeating: "5a17", count: 16)
        let path = directory.path("raw.db")
        let created = try runSQLCipherShell(
            try shell(), path,
            """
            PRAGMA key = "x'\(hex)'";
            CREATE TABLE t (a, b);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
            INSERT INTO t SELECT i, hex(randomblob(100)) FROM n;
            """)
        XCTAssertEqual(created.status, 0, created.stderr)
        let keyBytes = Data(
            stride(from: 0, to: hex.count, by: 2).map { offset -> UInt8 in
                let start = hex.index(hex.startIndex, offsetBy: offset)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
            })
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: RawKeyProvider(key: keyBytes))
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 500)
        XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok")
        XCTAssertEqual(db.cipherProvider, Self.ours)
        db.close()
    }

    func testAWrongKeyAndATamperedPageStillFail() throws {
        try requireOurProvider()
        let path = try makeDatabase("tamper.db", key: "right")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertThrowsError(try db.setKey(using: PassphraseKeyProvider("wrong"))) {
            XCTAssertEqual(nsError($0).code, 26)
        }
        db.close()

        // One byte of page 3's ciphertext flipped: the page's HMAC, computed by our provider, must not match.
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
        let pageSize: UInt64 = SQLCipherRuntime.majorVersion == 3 ? 1024 : 4096
        try handle.seek(toOffset: pageSize * 2 + 100)
        let byte = try XCTUnwrap(try handle.read(upToCount: 1)).first ?? 0
        try handle.seek(toOffset: pageSize * 2 + 100)
        try handle.write(contentsOf: Data([byte ^ 0x01]))
        try handle.close()
        let reopened = FMDatabase(path: path)
        XCTAssertTrue(reopened.open())
        try reopened.setKey(using: PassphraseKeyProvider("right"))
        let code: Int
        do {
            let rows = try reopened.executeQuery("select sum(length(b)) from t", values: nil)
            XCTAssertFalse(rows.next())
            rows.close()
            code = Int(reopened.lastErrorCode())
        } catch {
            code = nsError(error).code
        }
        XCTAssertTrue([11, 26].contains(code), "code \(code)")
        reopened.close()
    }

    /// The provider's point: a context per connection, not per page. Fails if contexts were made per page
    /// (the scan reads hundreds of pages).
    func testContextsAreReusedAcrossPages() throws {
        try requireOurProvider()
        let path = try makeDatabase("reuse.db", key: "reuse")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("reuse"))
        db.executeStatements("PRAGMA cache_size = 0")
        let before = CryptoProviderRegistration.contextsCreated
        for _ in 0..<3 { XCTAssertEqual(db.int(forQuery: "select count(*) from t where length(b) = 200"), 2_000) }
        let created = CryptoProviderRegistration.contextsCreated - before
        db.close()
        let pages = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0) / 4096
        XCTAssertGreaterThan(pages, 50)
        // At most a cipher and an HMAC context for each of the connection's SQLCipher contexts (other tests
        // may key connections meanwhile: a small allowance, far below one per page).
        XCTAssertLessThan(created, 16, "contexts created while reading \(pages)+ pages three times")
    }

    /// One provider context keeps the last key it set up per cipher direction and for the HMAC; a key that
    /// changes in place in the same buffer (as a rekey derives it), a digest switch or a failed call must
    /// never leave a stale key or state behind. Compared, step by step, with one-shot OpenSSL contexts (what
    /// SQLCipher's own provider computes). Fails, for example, when the kept key is compared by length only.
    func testOneContextMatchesOneShotOpenSSLThroughKeyChangesAndFailures() {
        XCTAssertEqual(fmdb_crypto_selftest(), 0, "the first step whose bytes differed")
    }

    /// SQLCipher 3's `PRAGMA cipher` (refused in SQL text on keyed connections; reachable through the C API):
    /// the provider fetches the named cipher, copies the choice to the other cipher context, writes a file
    /// SQLCipher's own provider reads with the same setting, and refuses an unknown name without changing
    /// the cipher.
    func testPragmaCipherOnSQLCipher3() throws {
        try requireOurProvider()
        guard SQLCipherRuntime.majorVersion == 3 else {
            throw XCTSkip("PRAGMA cipher = NAME exists in SQLCipher 3 only")
        }
        let path = directory.path("cipher.db")
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        let unknown = try Connection.open(path: directory.path("unknown.db"), flags: flags, vfs: nil)
        try unknown.key(SecureBytes(utf8: "cipher test"))
        try? unknown.runningLibraryStatements { try unknown.execute("PRAGMA cipher = 'no-such-cipher'") }
        XCTAssertEqual(try unknown.runningLibraryStatements { try unknown.pragmaText("PRAGMA cipher") }, "AES-256-CBC")
        // Modes whose tag a SQLCipher page has no room for are refused: every page would fail to decrypt.
        for mode in ["aes-256-gcm", "aes-128-ccm", "aes-256-ocb", "id-aes256-wrap", "chacha20-poly1305"] {
            try? unknown.runningLibraryStatements { try unknown.execute("PRAGMA cipher = '\(mode)'") }
            XCTAssertEqual(
                try unknown.runningLibraryStatements { try unknown.pragmaText("PRAGMA cipher") }, "AES-256-CBC", mode)
        }
        try unknown.close()

        let connection = try Connection.open(path: path, flags: flags, vfs: nil)
        try connection.key(SecureBytes(utf8: "cipher test"))
        try connection.runningLibraryStatements {
            try connection.execute("PRAGMA cipher = 'aes-128-cbc'")
            XCTAssertEqual(try connection.pragmaText("PRAGMA cipher"), "AES-128-CBC")
            try connection.execute("create table t (a text)")
            try connection.execute("insert into t values ('with aes-128')")
        }
        try connection.close()
        let result = try runSQLCipherShell(
            try shell(), path, "PRAGMA key = 'cipher test';\nPRAGMA cipher = 'aes-128-cbc';\nSELECT a FROM t;\n")
        XCTAssertEqual(
            result.stdout.split(separator: "\n").last.map(String.init), "with aes-128", result.stdout + result.stderr)
        let withoutTheSetting = try runSQLCipherShell(
            try shell(), path, "PRAGMA key = 'cipher test';\nSELECT a FROM t;\n")
        XCTAssertTrue(withoutTheSetting.stderr.contains("not a database"), withoutTheSetting.stderr)
    }

    func testUnverifiedVersionsKeepSQLCiphersProvider() {
        XCTAssertNotNil(CryptoProviderRegistration.layout(forCipherVersion: "3.4.1"))
        XCTAssertNotNil(CryptoProviderRegistration.layout(forCipherVersion: "4.6.1 community"))
        // 4.5.x has 4.6.1's provider interface (src/sqlcipher.h and the registration, compared in the sources).
        XCTAssertEqual(
            CryptoProviderRegistration.layout(forCipherVersion: "4.5.6 community"),
            CryptoProviderRegistration.layout(forCipherVersion: "4.6.1 community"))
        // 4.19.0 has 4.7's interface (init/shutdown, `next`), another layout than 4.6.1's.
        XCTAssertNotNil(CryptoProviderRegistration.layout(forCipherVersion: "4.19.0 community"))
        XCTAssertNotEqual(
            CryptoProviderRegistration.layout(forCipherVersion: "4.19.0 community"),
            CryptoProviderRegistration.layout(forCipherVersion: "4.6.1 community"))
        for version in [
            "4.5.0 community", "4.6.1", "4.7.0 community", "4.9.0 community", "4.19.0", "4.19.1 community", "3.4.2",
            "4.6.1 enterprise", "4.19.0 enterprise", "", nil,
        ] {
            XCTAssertNil(CryptoProviderRegistration.layout(forCipherVersion: version), version ?? "nil")
        }
    }

    /// Setting the switch after the first keyed connection changes nothing (documented): the provider is
    /// chosen once per process.
    func testTheSwitchIsReadOnceBeforeTheFirstKeyedConnection() throws {
        try requireOurProvider()
        _ = try makeDatabase("once.db", key: "once", rows: 10)
        FMDatabase.cryptoProvider = .sqlcipher
        defer { FMDatabase.cryptoProvider = .library }
        let db = FMDatabase(path: directory.path("once.db"))
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("once"))
        XCTAssertEqual(db.cipherProvider, Self.ours)
        db.close()
    }

    /// The opt-out, end to end in a fresh process: the tool with FMDB_CRYPTO_PROVIDER=sqlcipher runs
    /// SQLCipher's provider, without it ours, on the same file.
    func testTheEnvironmentOptOutSelectsSQLCiphersProvider() throws {
        try requireOurProvider()
        let tool = try builtTool()
        let path = try makeDatabase("optout.db", key: "opt out", rows: 300)
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = "opt out"
        environment["FMDB_CRYPTO_PROVIDER"] = nil
        let arguments = ["sql", path, "PRAGMA cipher_provider", "--key-env", "K"]
        let ours = try runProcess(tool, arguments, environment: environment)
        XCTAssertEqual(ours.status, 0, ours.stderr)
        XCTAssertTrue(ours.stdout.contains(Self.ours), ours.stdout)
        environment["FMDB_CRYPTO_PROVIDER"] = "sqlcipher"
        let theirs = try runProcess(tool, arguments, environment: environment)
        XCTAssertEqual(theirs.status, 0, theirs.stderr)
        XCTAssertTrue(theirs.stdout.contains("openssl"), theirs.stdout)
        XCTAssertFalse(theirs.stdout.contains(Self.ours), theirs.stdout)
        let count = try runProcess(
            tool, ["sql", path, "select count(*) from t", "--key-env", "K"], environment: environment)
        XCTAssertTrue(count.stdout.contains("300"), count.stdout + count.stderr)
    }

    /// Byte compatibility both ways with SQLCipher's own provider of the same library, where no shell of the
    /// line is at hand: the tool, in a child process with FMDB_CRYPTO_PROVIDER=sqlcipher, encrypts a file
    /// that ours opens and reads whole, and reads whole a file ours wrote (`PRAGMA cipher_integrity_check`
    /// checks every page's HMAC with the provider that runs).
    func testFilesOfSQLCiphersOwnProviderAndOursOpenBothWays() throws {
        try requireOurProvider()
        let tool = try builtTool()
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = "both ways"
        environment["FMDB_CRYPTO_PROVIDER"] = "sqlcipher"
        // Theirs to ours: a plain file, encrypted by SQLCipher's provider in the child.
        let plain = directory.path("plain.db")
        let source = FMDatabase(path: plain)
        XCTAssertTrue(source.open())
        XCTAssertTrue(source.executeUpdate("create table t (id integer primary key, b blob)"))
        XCTAssertTrue(source.beginTransaction())
        for i in 0..<500 { XCTAssertTrue(source.executeUpdate("insert into t values (?, ?)", i, Data(count: 300))) }
        XCTAssertTrue(source.commit())
        source.close()
        let theirs = directory.path("theirs.db")
        let encrypted = try runProcess(tool, ["encrypt", plain, theirs, "--key-env", "K"], environment: environment)
        XCTAssertEqual(encrypted.status, 0, encrypted.stderr)
        let db = FMDatabase(path: theirs)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("both ways"))
        XCTAssertEqual(db.cipherProvider, Self.ours)
        XCTAssertEqual(db.int(forQuery: "select count(*) from t where length(b) = 300"), 500)
        XCTAssertEqual(db.string(forQuery: "PRAGMA cipher_integrity_check"), nil, "no page fails its HMAC")
        db.close()
        // Ours to theirs.
        let ours = try makeDatabase("ours.db", key: "both ways", rows: 500)
        for sql in ["select count(*) from t", "PRAGMA cipher_integrity_check", "PRAGMA cipher_provider"] {
            let result = try runProcess(tool, ["sql", ours, sql, "--key-env", "K"], environment: environment)
            XCTAssertEqual(result.status, 0, sql + ": " + result.stderr)
            switch sql {
            case "select count(*) from t": XCTAssertTrue(result.stdout.contains("500"), result.stdout)
            case "PRAGMA cipher_provider": XCTAssertFalse(result.stdout.contains(Self.ours), result.stdout)
            default:
                // No row under the tool's header: no page failed its HMAC.
                let rows = result.stdout.split(separator: "\n").filter {
                    $0 != "cipher_integrity_check" && $0.first != "-"
                }
                XCTAssertEqual(rows, [], result.stdout)
            }
        }
    }

    /// Several threads on keyed pool connections at once: each connection's contexts are its own (run
    /// under ThreadSanitizer by Scripts/test), and the file stays readable by SQLCipher's provider.
    func testAKeyedPoolOnSeveralThreads() throws {
        try requireOurProvider()
        let path = directory.path("pool.db")
        let pool = try FMDatabasePool(
            path: path,
            keyProvider: PBKDF2KeyProvider(
                passphrase: "pool", digest: .sha256, unsafeIterations: 1_000))
        pool.maximumNumberOfDatabasesToCreate = 4
        try pool.inDatabase { db in
            try db.executeUpdate("create table t (id integer primary key, worker integer, b blob)", values: nil)
        }
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for round in 0..<20 {
                do {
                    try pool.inTransaction(.immediate) { db in
                        for i in 0..<25 {
                            try db.executeUpdate(
                                "insert into t (worker, b) values (?, ?)",
                                values: [
                                    worker, Data(repeating: UInt8(truncatingIfNeeded: round * 25 + i), count: 300),
                                ])
                        }
                    }
                    _ = try pool.inDatabase { db in
                        try db.executeQuery("select count(*), sum(length(b)) from t", values: nil).next()
                    }
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, 0)
        let count = pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }
        XCTAssertEqual(count, 4 * 20 * 25)
        pool.releaseAllDatabases()
    }
}
