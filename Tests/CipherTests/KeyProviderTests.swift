@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// The KeyProvider family: interop with the `sqlcipher` shell for every provider, with the expected
/// keys computed independently (the `openssl kdf` command), rejections, and special files.
final class KeyProviderTests: FMDBCipherTestCase {
    func shell(_ path: String, _ script: String) throws -> String {
        let shell = try lineShell()
        let result = try runSQLCipherShell(shell, path, script)
        return (result.stdout + result.stderr).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `openssl kdf ...` prints the key as colon-separated hex.
    func opensslKDF(_ arguments: [String]) throws -> String {
        let openssl = try XCTUnwrap(which("openssl"), "apt-get install openssl")
        let result = try runProcess(openssl, ["kdf", "-keylen", "32"] + arguments)
        XCTAssertEqual(result.status, 0, result.stderr)
        return result.stdout.replacingOccurrences(of: ":", with: "").trimmingCharacters(in: .whitespacesAndNewlines)
            .lowercased()
    }

    func saltHex(_ path: String) throws -> String {
        let head = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16)
        XCTAssertEqual(head.count, 16)
        return head.map { String(format: "%02x", $0) }.joined()
    }

    func makeDatabase(_ name: String, provider: any KeyProvider) throws -> String {
        let path = directory.path(name)
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
        try queue.inDatabase { db in
            try db.executeUpdate("create table t (a text)", values: nil)
            try db.executeUpdate("insert into t values (?)", values: ["made with \(type(of: provider))"])
        }
        queue.close()
        return path
    }

    func testDefaultPBKDF2ProviderOpensInTheShellWithTheDerivedRawKey() throws {
        _ = try lineShell()  // skips here, not inside an assertion, on a line without a shell
        let provider = PBKDF2KeyProvider(passphrase: "pbkdf2 passphrase")
        XCTAssertEqual(provider.digest, .sha512)
        XCTAssertEqual(provider.iterations, 256_000)
        let path = try makeDatabase("pbkdf2.db", provider: provider)
        let expected = try opensslKDF([
            "-kdfopt", "digest:SHA512", "-kdfopt", "pass:pbkdf2 passphrase",
            "-kdfopt", "hexsalt:\(try saltHex(path))", "-kdfopt", "iter:256000", "PBKDF2",
        ])
        XCTAssertEqual(expected.count, 64)
        XCTAssertEqual(
            try shell(path, "PRAGMA key = \"x'\(expected)'\";\nSELECT a FROM t;\n"), "made with PBKDF2KeyProvider")
        let viaPassphrase = try shell(path, "PRAGMA key = 'pbkdf2 passphrase';\nSELECT a FROM t;\n")
        if CipherFormat.linkedDefault == .v4 {
            // SQLCipher 4's own KDF is this provider's default (PBKDF2-HMAC-SHA512 × 256,000 over the salt).
            XCTAssertEqual(viaPassphrase, "made with PBKDF2KeyProvider")
        } else {
            XCTAssertTrue(viaPassphrase.contains("not a database"), viaPassphrase)
        }
        XCTAssertEqual(provider.derivationCount, 1)
    }

    func testSQLCipherCompatibleProviderMatchesTheShellBothWays() throws {
        _ = try lineShell()  // skips here, not inside an assertion, on a line without a shell
        let provider = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "shared passphrase")
        // The linked SQLCipher's own KDF: SHA-512 × 256,000 on 4.x, SHA-1 × 64,000 on 3.x.
        XCTAssertEqual(provider.digest, CipherFormat.linkedDefault == .v4 ? .sha512 : .sha1)
        XCTAssertEqual(provider.iterations, CipherFormat.linkedDefault == .v4 ? 256_000 : 64_000)
        let here = try makeDatabase("compat.db", provider: provider)
        XCTAssertEqual(
            try shell(here, "PRAGMA key = 'shared passphrase';\nSELECT a FROM t;\n"), "made with PBKDF2KeyProvider")

        let there = directory.path("from-shell.db")
        _ = try shell(
            there, "PRAGMA key = 'shared passphrase';\nCREATE TABLE s (a);\nINSERT INTO s VALUES ('from the shell');\n")
        let other = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: Data("shared passphrase".utf8))
        let queue = try FMDatabaseQueue(path: there, keyProvider: other)
        XCTAssertEqual(queue.inDatabase { db in db.string(forQuery: "select a from s") }, "from the shell")
        // The same key as SQLCipher's own KDF: a PassphraseKeyProvider opens what this one made.
        let passphraseQueue = try FMDatabaseQueue(path: here, keyProvider: PassphraseKeyProvider("shared passphrase"))
        XCTAssertEqual(
            passphraseQueue.inDatabase { db in db.string(forQuery: "select a from t") },
            "made with PBKDF2KeyProvider")
    }

    func testPassphraseAndRawProvidersInteropWithTheShell() throws {
        _ = try lineShell()  // skips here, not inside an assertion, on a line without a shell
        let passphrasePath = try makeDatabase(
            "pass.db", provider: PassphraseKeyProvider(data: Data("bytes passphrase".utf8)))
        XCTAssertEqual(
            try shell(passphrasePath, "PRAGMA key = 'bytes passphrase';\nSELECT a FROM t;\n"),
            "made with PassphraseKeyProvider")
        let key = Data((0..<32).map { UInt8(255 - $0) })
        let rawPath = try makeDatabase("raw.db", provider: try RawKeyProvider(key: key))
        let hex = key.map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(
            try shell(rawPath, "PRAGMA key = \"x'\(hex)'\";\nSELECT a FROM t;\n"), "made with RawKeyProvider")
    }

    func testScryptProviderOpensInTheShellWithTheDerivedRawKey() throws {
        _ = try lineShell()  // skips here, not inside an assertion, on a line without a shell
        let provider = ScryptKeyProvider(passphrase: "memory hard")
        XCTAssertEqual(provider.n, 1 << 15)
        let path = try makeDatabase("scrypt.db", provider: provider)
        let expected = try opensslKDF([
            "-kdfopt", "pass:memory hard", "-kdfopt", "hexsalt:\(try saltHex(path))",
            "-kdfopt", "n:32768", "-kdfopt", "r:8", "-kdfopt", "p:1", "-kdfopt", "maxmem_bytes:67108864", "SCRYPT",
        ])
        XCTAssertEqual(
            try shell(path, "PRAGMA key = \"x'\(expected)'\";\nSELECT a FROM t;\n"), "made with ScryptKeyProvider")
        XCTAssertEqual(provider.derivationCount, 1)
    }

    func testRejections() throws {
        XCTAssertThrowsError(try RawKeyProvider(key: Data(count: 16))) { XCTAssertEqual(nsError($0).code, 21) }
        XCTAssertThrowsError(try DatabaseKey.raw(Data(count: 32), salt: Data(count: 8)))
        let request = KeyRequest(databasePath: nil, salt: nil)
        XCTAssertThrowsError(try PassphraseKeyProvider("").key(for: request))
        XCTAssertThrowsError(try PBKDF2KeyProvider(passphrase: "").key(for: request))
        XCTAssertThrowsError(try PBKDF2KeyProvider(passphrase: "p", iterations: 1_000).key(for: request)) { error in
            XCTAssertTrue(nsError(error).localizedDescription.contains("floor"))
        }
        XCTAssertNoThrow(try PBKDF2KeyProvider(passphrase: "p", unsafeIterations: 1_000).key(for: request))
        XCTAssertThrowsError(try PBKDF2KeyProvider(passphrase: "p", unsafeIterations: 0).key(for: request))
        XCTAssertThrowsError(try ScryptKeyProvider(passphrase: "p", n: 1024).key(for: request))
        XCTAssertThrowsError(
            try ScryptKeyProvider(passphrase: "p", n: 1000, unsafeAllowWeakParameters: true).key(for: request))
        XCTAssertThrowsError(try ScryptKeyProvider(passphrase: "p", n: 1 << 20, maxMemory: 1 << 20).key(for: request)) {
            error in
            XCTAssertTrue(nsError(error).localizedDescription.contains("maxMemory"))
        }
        XCTAssertNoThrow(
            try ScryptKeyProvider(passphrase: "p", n: 1024, unsafeAllowWeakParameters: true).key(for: request))
        // A provider's failure reaches the opener unchanged and nothing is created.
        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: directory.path("never.db"), keyProvider: PBKDF2KeyProvider(passphrase: "p", iterations: 5)))
    }

    func testDerivedKeysAreCachedPerSalt() throws {
        let provider = PBKDF2KeyProvider(passphrase: "cache", unsafeIterations: 100)
        let saltA = Data(repeating: 1, count: 16)
        let saltB = Data(repeating: 2, count: 16)
        for _ in 0..<3 {
            _ = try provider.key(for: KeyRequest(databasePath: "/a", salt: saltA))
            _ = try provider.key(for: KeyRequest(databasePath: "/b", salt: saltB))
        }
        XCTAssertEqual(provider.derivationCount, 2)
        // A new file gets one random salt, the same for every connection that asks before it is written.
        let first = try provider.key(for: KeyRequest(databasePath: "/new", salt: nil)).sqlcipherKeyBytes()
        let second = try provider.key(for: KeyRequest(databasePath: "/new", salt: nil)).sqlcipherKeyBytes()
        XCTAssertTrue(first.isEqual(to: second))
        XCTAssertEqual(first.count, 3 + 96, "x'<key><salt>'")
        XCTAssertEqual(provider.derivationCount, 3)
    }

    func testMissingFileIsCreatedAndReadOnlyMissingFileFails() throws {
        let path = directory.path("missing.db")
        let provider = PBKDF2KeyProvider(passphrase: "new", unsafeIterations: 100)
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, flags: SQLITE_OPEN_READONLY, keyProvider: provider)) {
            error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_CANTOPEN))
        }
        XCTAssertNoThrow(try FMDatabaseQueue(path: path, keyProvider: provider))
        // One page, of the linked SQLCipher's default size (1024 bytes on 3.x, 4096 on 4.x).
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: path)).count, CipherFormat.linkedDefault == .v4 ? 4096 : 1024,
            "the header is written at once")
        XCTAssertNotEqual(DatabaseFile.kind(atPath: path), .plaintext)
    }

    func testEmptyFileIsTreatedAsANewDatabase() throws {
        let path = directory.path("empty.db")
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data()))
        let provider = PBKDF2KeyProvider(passphrase: "empty", unsafeIterations: 100)
        let pool = try FMDatabasePool(path: path, keyProvider: provider)
        // The keyed open wrote the first page, so the salt is on disk before the next connection asks.
        guard case .encrypted(let salt) = DatabaseFile.kind(atPath: path) else { return XCTFail("no header written") }
        pool.inDatabase { db in
            db.executeUpdate("create table t (a)")
            pool.inDatabase { other in XCTAssertTrue(other.executeUpdate("insert into t values (1)")) }
        }
        XCTAssertEqual(provider.derivationCount, 1)
        if case .encrypted(let after) = DatabaseFile.kind(atPath: path) { XCTAssertEqual(after, salt) }
        let reopened = try FMDatabaseQueue(
            path: path, keyProvider: PBKDF2KeyProvider(passphrase: "empty", unsafeIterations: 100))
        XCTAssertEqual(reopened.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1)
    }

    func testPlaintextFileWithAKeyIsNotADatabase() throws {
        let path = directory.path("plain.db")
        let plain = try XCTUnwrap(FMDatabaseQueue(path: path))
        plain.inDatabase { db in db.executeUpdate("create table t (a)") }
        plain.close()
        for provider in [PassphraseKeyProvider("k"), PBKDF2KeyProvider(passphrase: "k", unsafeIterations: 100)]
            as [any KeyProvider]
        {
            XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: provider)) {
                XCTAssertEqual(nsError($0).code, 26)
            }
            XCTAssertThrowsError(try FMDatabasePool(path: path, keyProvider: provider)) {
                XCTAssertEqual(nsError($0).code, 26)
            }
        }
        XCTAssertEqual(DatabaseFile.kind(atPath: path), .plaintext)
    }
}
