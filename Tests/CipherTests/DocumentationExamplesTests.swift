import FMDB
import Foundation
import Logging
import TestSupport
import XCTest

/// The examples of the DocC articles (Sources/FMDB/FMDB.docc) that the README tests do not already
/// run, compiled and run as written (keep them in step). Each test says which article it follows.
final class DocumentationExamplesTests: FMDBCipherTestCase {
    private enum MyError: Error { case noKey }

    /// The article's custom provider: the key from an environment variable.
    private struct EnvironmentKeyProvider: KeyProvider {
        let variable: String
        func key(for request: KeyRequest) throws -> DatabaseKey {
            guard let value = ProcessInfo.processInfo.environment[variable] else { throw MyError.noKey }
            return .passphrase(value)
        }
    }

    // FMDB.docc/FMDB.md (the landing page)
    func testLandingPageExample() throws {
        let path = directory.path("landing.sqlite")
        let passphrase = "correct horse battery staple"

        let queue = try FMDatabaseQueue(path: path, keyProvider: PBKDF2KeyProvider(passphrase: passphrase))
        queue.inDatabase { db in
            db.executeUpdate("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)")
            db.executeUpdate("INSERT INTO notes (body) VALUES (?)", "first")
        }
        queue.close()

        let wrong = PBKDF2KeyProvider(passphrase: "wrong")
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: wrong)) {
            XCTAssertEqual(nsError($0).code, 26)
        }
        let again = try FMDatabaseQueue(path: path, keyProvider: PBKDF2KeyProvider(passphrase: passphrase))
        let body: String? = try again.inDatabase { db throws in db.string(forQuery: "SELECT body FROM notes") }
        XCTAssertEqual(body, "first")
        again.close()
    }

    // FMDB.docc/KeysAndKeyProviders.md: the overview's three ways to key, each on its own file.
    func testKeysArticleOverview() throws {
        let passphrase = "correct horse battery staple"
        let keyFromKeyStore = Data((0..<32).map { UInt8($0) })

        var path = directory.path("one.sqlite")
        let db = FMDatabase(path: path)
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: PBKDF2KeyProvider(passphrase: passphrase))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        db.close()

        path = directory.path("two.sqlite")
        let queue = try FMDatabaseQueue(path: path, keyProvider: ScryptKeyProvider(passphrase: passphrase))
        queue.inDatabase { db in XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)")) }
        queue.close()

        path = directory.path("three.sqlite")
        let pool = try FMDatabasePool(path: path, keyProvider: try RawKeyProvider(key: keyFromKeyStore))
        pool.inDatabase { db in XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)")) }
        pool.releaseAllDatabases()

        for name in ["one.sqlite", "two.sqlite", "three.sqlite"] {
            let bytes = try XCTUnwrap(FileManager.default.contents(atPath: directory.path(name)))
            XCTAssertFalse(bytes.contains(bytes: "SQLite format 3"), "\(name) is not encrypted")
        }
    }

    // FMDB.docc/KeysAndKeyProviders.md: "Writing a provider".
    func testKeysArticleEnvironmentProvider() throws {
        let path = directory.path("env.sqlite")
        let variable = "FMDB_DOCS_TEST_KEY_\(getpid())"

        let provider = EnvironmentKeyProvider(variable: variable)
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: provider)) { XCTAssertTrue($0 is MyError) }
        setenv(variable, "from the environment", 1)
        defer { unsetenv(variable) }
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
        queue.inDatabase { db in XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)")) }
        queue.close()

        // A passphrase key: the same as PassphraseKeyProvider with the same text.
        let check = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("from the environment"))
        XCTAssertTrue(try check.inDatabase { db throws in db.tableExists("t") })
        check.close()
    }

    // FMDB.docc/KeysAndKeyProviders.md: "Cipher settings".
    func testKeysArticleCipherSettings() throws {
        let path = directory.path("pages.sqlite")
        let provider = PassphraseKeyProvider("p")

        let db = FMDatabase(path: path)
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: provider, settings: CipherSettings(pageSize: 4096))  // before the first write
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        db.close()

        // The article: on SQLCipher 3 such a file opens only with the same setting; on SQLCipher 4, whose
        // default 4096 is, it opens without one, and a size other than the default (8192) needs the setting.
        let v4 = CipherFormat.linkedDefault == .v4
        let plain = FMDatabase(path: path)
        XCTAssertTrue(plain.open())
        if v4 {
            XCTAssertNoThrow(try plain.setKey(using: provider))
            XCTAssertTrue(plain.tableExists("t"))
        } else {
            XCTAssertThrowsError(try plain.setKey(using: provider)) { XCTAssertEqual(nsError($0).code, 26) }
        }
        plain.close()
        let same = FMDatabase(path: path)
        XCTAssertTrue(same.open())
        XCTAssertNoThrow(try same.setKey(using: provider, settings: CipherSettings(pageSize: 4096)))
        XCTAssertTrue(same.tableExists("t"))
        same.close()

        // A page size that is neither line's default: only the same setting opens the file, on both lines.
        let other = directory.path("pages-8192.sqlite")
        let large = FMDatabase(path: other)
        guard large.open() else { throw large.lastError() }
        try large.setKey(using: provider, settings: CipherSettings(pageSize: 8192))
        XCTAssertTrue(large.executeUpdate("CREATE TABLE t (a)"))
        large.close()
        let unset = FMDatabase(path: other)
        XCTAssertTrue(unset.open())
        XCTAssertThrowsError(try unset.setKey(using: provider)) { XCTAssertEqual(nsError($0).code, 26) }
        unset.close()
        let matching = FMDatabase(path: other)
        XCTAssertTrue(matching.open())
        XCTAssertNoThrow(try matching.setKey(using: provider, settings: CipherSettings(pageSize: 8192)))
        XCTAssertTrue(matching.tableExists("t"))
        matching.close()
    }

    // FMDB.docc/SQLCipher3And4.md: "Finding a file's format" (a format asked for, the format read).
    func testSQLCipherArticleFormat() throws {
        let path = directory.path("v3.sqlite")
        let provider = try RawKeyProvider(key: Data(repeating: 7, count: 32))
        var printed: [String] = []
        func print(_ text: String) { printed.append(text) }

        let db = FMDatabase(path: path)
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: provider, settings: CipherSettings(format: .v3))  // only SQLCipher 3's format
        if db.cipherFormat == .v3 { print("an old file: fmdb-cipher migrate converts it") }
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        db.close()
        XCTAssertEqual(printed, ["an old file: fmdb-cipher migrate converts it"])

        // Found again without being asked for, on either SQLCipher line.
        let again = FMDatabase(path: path)
        guard again.open() else { throw again.lastError() }
        try again.setKey(using: provider)
        XCTAssertEqual(again.cipherFormat, .v3)
        XCTAssertTrue(again.tableExists("t"))
        again.close()
    }

    // FMDB.docc/QueuesAndPools.md: "Changing the key" (the outcome of a queue's rekey).
    func testQueuesArticleRekeyOutcome() throws {
        let path = directory.path("outcome.sqlite")
        let queue = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("old"))
        queue.inDatabase { db in _ = db.executeUpdate("CREATE TABLE t (a)") }
        let newProvider = PassphraseKeyProvider("new")
        var printed: [String] = []
        func print(_ text: String) { printed.append(text) }

        if case .checkpointPending(let error) = try queue.rekey(using: newProvider) {
            print("rekeyed; the WAL checkpoint is pending: \(error.message)")
        }
        queue.close()
        XCTAssertEqual(printed, [], "no other connection: the rekey is done, nothing pending")
        XCTAssertThrowsError(try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("old"))) {
            XCTAssertEqual(nsError($0).code, 26)
        }
        let reopened = try FMDatabaseQueue(path: path, keyProvider: newProvider)
        XCTAssertTrue(try reopened.inDatabase { db throws in db.tableExists("t") })
        reopened.close()
    }

    // FMDB.docc/SQLCipher3And4.md: the version a program runs with.
    func testSQLCipherArticleVersion() {
        let db = FMDatabase()
        db.open()
        print(db.cipherVersion ?? "no codec")
        XCTAssertNotNil(db.cipherVersion)
        XCTAssertNotNil(db.cipherProviderVersion)
        db.close()
    }

    // FMDB.docc/RunningAService.md: the SIGHUP handler's reload, after a rekey made elsewhere.
    func testRunningAServiceReloadsTheKeyFile() throws {
        func reloadDatabaseKey(_ writer: some FMDatabaseWriter, keyFilePath: String, logger: Logger) {
            do {
                let key = try KeyMaterial.read(from: .file(path: keyFilePath), describedAs: "database key")
                try writer.replaceKeyProvider(RawKeyProvider(material: key))
                logger.info("database key reloaded")
            } catch {
                logger.error("database key not reloaded; the old one stays in use: \(error)")
            }
        }

        let path = directory.path("service.db")
        let keyFilePath = directory.path("db.key")
        let oldKey = String(repeating: "ab", count: 32)
        let newKey = String(repeating: "cd", count: 32)
        let pool = try FMDatabasePool(path: path, keyProvider: RawKeyProvider(key: Data(repeating: 0xAB, count: 32)))
        XCTAssertTrue(pool.inDatabase { db in db.executeUpdate("CREATE TABLE t (v)") } ?? false)
        XCTAssertEqual(oldKey.count, 64)

        // The operator: the new key file, then the rekey (another connection, as fmdb-cipher's).
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: keyFilePath, contents: Data((newKey + "\n").utf8), attributes: [.posixPermissions: 0o600]))
        let other = FMDatabase(path: path)
        XCTAssertTrue(other.open())
        try other.setKey(using: RawKeyProvider(key: Data(repeating: 0xAB, count: 32)))
        try other.rekeySafely(using: RawKeyProvider(key: Data(repeating: 0xCD, count: 32)))
        other.close()

        let capture = LogCapture()
        reloadDatabaseKey(pool, keyFilePath: keyFilePath, logger: capture.logger(label: "app"))
        XCTAssertEqual(capture.all, ["info database key reloaded"])
        XCTAssertTrue(pool.inDatabase { db in db.executeUpdate("INSERT INTO t VALUES (1)") } ?? false)
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }, 1)
    }
}
