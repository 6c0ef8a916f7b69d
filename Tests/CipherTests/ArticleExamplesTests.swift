import FMDB
import Foundation
import TestSupport
import XCTest

/// What the import in QueuesAndPools.md's cancellation example stands for: a statement that runs until it
/// is interrupted, after a write that must not be committed.
func longImport(_ db: FMDatabase) throws {
    try db.executeUpdate("INSERT INTO imported VALUES (1)", values: nil)
    let rs = try db.executeQuery(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4000000000) SELECT count(*) FROM c",
        values: nil)
    defer { rs.close() }
    while try rs.nextWithError() {}
}

/// More examples of the DocC articles (Sources/FMDB/FMDB.docc), each block copied verbatim between the
/// `// Article:` and `// End of the article's block.` lines (keep them in step), with what it needs set
/// up around it, then run and checked.
final class ArticleExamplesTests: FMDBCipherTestCase {
    /// KeysAndKeyProviders.md, reading a secret into `KeyMaterial`: the block, verbatim. Compiled, but not
    /// called: its first line prompts at the terminal (which KeyMaterialReadingTests drives through a
    /// pseudo-terminal). `testKeysArticleKeyMaterialSources` runs the other two sources.
    // swift-format-ignore
    private func keyMaterialArticleBlock() throws -> [KeyMaterial] {
        // Article:
        // A terminal: echo off, and back on when Ctrl-C or SIGTERM comes at the prompt (then the program's own
        // handler for it runs, if it has one, or the signal ends the program).
        let typed = try KeyMaterial.read(from: .terminal(prompt: "Passphrase: "))
        // An environment variable, zeroed in place and removed once read (child processes do not inherit it).
        let fromEnvironment = try KeyMaterial.read(from: .environment(name: "APP_DB_KEY", unsetAfterReading: true))
        // A file: refused when group or others can write it, a warning when they can read it.
        let fromFile = try KeyMaterial.read(from: .file(path: "/etc/app/db.key")) { print("warning:", $0) }
        // End of the article's block.
        return [typed, fromEnvironment, fromFile]
    }

    // KeysAndKeyProviders.md: the environment line verbatim; the file line on a file of the test's own.
    func testKeysArticleKeyMaterialSources() throws {
        setenv("APP_DB_KEY", "from the environment", 1)
        defer { unsetenv("APP_DB_KEY") }
        let fromEnvironment = try KeyMaterial.read(from: .environment(name: "APP_DB_KEY", unsetAfterReading: true))
        let expected = Data("from the environment".utf8).withUnsafeBytes { KeyMaterial(copying: $0) }
        XCTAssertTrue(fromEnvironment.isEqual(to: expected))
        XCTAssertNil(getenv("APP_DB_KEY"), "removed once read")

        let keyFile = directory.path("db.key")
        XCTAssertTrue(FileManager.default.createFile(atPath: keyFile, contents: Data("from a file\n".utf8)))
        XCTAssertEqual(chmod(keyFile, 0o644), 0)
        var warnings: [String] = []
        let fromFile = try KeyMaterial.read(from: .file(path: keyFile)) { warnings.append($0) }
        XCTAssertEqual(fromFile.count, "from a file".utf8.count)
        XCTAssertEqual(warnings.count, 1, "others can read it: \(warnings)")
        XCTAssertEqual(chmod(keyFile, 0o666), 0)
        XCTAssertThrowsError(try KeyMaterial.read(from: .file(path: keyFile)) { print("warning:", $0) }) {
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_PERM))
        }
    }

    // QueuesAndPools.md, "Setting up every connection".
    func testQueuesArticlePrepareDatabase() throws {
        let path = directory.path("prepared.sqlite")
        let provider = try XCTUnwrap(StorageMode.encrypted.keyProvider)
        // Article:
        var configuration = FMDatabaseConfiguration(keyProvider: provider)
        configuration.prepareDatabase = { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil) }
        let pool = try FMDatabasePool(path: path, configuration: configuration)
        // End of the article's block.
        defer { pool.releaseAllDatabases() }
        pool.maximumNumberOfDatabasesToCreate = 2
        // Every connection the pool hands out was set up: two at once, so a second one was opened.
        pool.inDatabase { first in
            XCTAssertEqual(first.int(forQuery: "PRAGMA foreign_keys"), 1)
            pool.inDatabase { second in
                XCTAssertFalse(first === second)
                XCTAssertEqual(second.int(forQuery: "PRAGMA foreign_keys"), 1)
            }
        }
        XCTAssertEqual(pool.countOfOpenDatabases, 2)
    }

    // QueuesAndPools.md, "Cancellation": a cancelled performTransaction commits nothing.
    func testQueuesArticleCancellation() async throws {
        let pool = try StorageMode.encrypted.makePool(at: directory.path("import.sqlite"))
        defer { pool.releaseAllDatabases() }
        try pool.inDatabase { db in try db.execute("CREATE TABLE imported (x)") }
        // Article:
        let task = Task { try await pool.performTransaction { db in try longImport(db) } }
        task.cancel()  // the running statement stops within milliseconds; nothing is committed
        // End of the article's block.
        let result = await task.result
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertEqual(pool.inDatabase { $0.int(forQuery: "SELECT count(*) FROM imported") }, 0)
    }

    // QueuesAndPools.md, "A transaction SQLite rolled back": the rows around the rolled-back statement are not
    // committed, and the error says so (any other error would leave the block and fail the test).
    // swift-format-ignore
    func testQueuesArticleRolledBackTransaction() throws {
        let quiet = FMDatabaseConfiguration(logsErrors: false)
        let queue = try FMDatabaseQueue(path: directory.path("notes.sqlite"), configuration: quiet)
        defer { queue.close() }
        try queue.inDatabase { db in
            try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            try db.execute("CREATE TABLE tags (name TEXT UNIQUE)")
            try db.execute("INSERT INTO tags VALUES ('duplicate')")
        }
        // Article:
        do {
            try queue.inTransaction(.immediate) { db in
                db.executeUpdate("INSERT INTO notes (body) VALUES (?)", "kept only with the next row")
                db.executeUpdate("INSERT OR ROLLBACK INTO tags (name) VALUES (?)", "duplicate")  // SQLite rolls back
                db.executeUpdate("INSERT INTO notes (body) VALUES (?)", "refused")              // not run
            }
        } catch let error as FMDatabaseError where error.transactionWasRolledBack {
            // Nothing of the block was committed; error.resultCode is SQLITE_CONSTRAINT.
        }
        // End of the article's block.
        XCTAssertEqual(queue.inDatabase { $0.int(forQuery: "SELECT count(*) FROM notes") }, 0)
    }

    // KeySlotsAndRecoveryKeys.md, "Copies that keep their slots": run in the test's directory, as the
    // block's relative paths want.
    func testKeySlotsArticleCopy() throws {
        let previous = FileManager.default.currentDirectoryPath
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(directory.url.path))
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
        _ = try KeySlots.createDatabase(
            at: "app.db", secret: .passphrase("ops"), kdf: .unsafePBKDF2SHA512(iterations: 1_000))
        let source = try FMDatabaseQueue(path: "app.db", keyProvider: KeySlotKeyProvider(secret: .passphrase("ops")))
        try source.inDatabase { db in
            try db.execute("CREATE TABLE t (a TEXT)")
            try db.execute("INSERT INTO t VALUES (?)", "kept")
        }
        source.close()

        try copyAsTheArticleDoes()

        // The copy opens with the source's slots, under the page size it was given.
        let copy = FMDatabase(path: "copy.db")
        XCTAssertTrue(copy.open())
        defer { copy.close() }
        try copy.setKey(using: KeySlotKeyProvider(secret: .passphrase("ops")), settings: CipherSettings(pageSize: 4096))
        XCTAssertEqual(copy.string(forQuery: "SELECT a FROM t"), "kept")
        XCTAssertEqual(copy.int(forQuery: "PRAGMA cipher_page_size"), 4096)
    }

    // swift-format-ignore
    private func copyAsTheArticleDoes() throws {
        // Article:
        try KeySlots.copySlotFile(from: "app.db", to: "copy.db")
        let provider = KeySlotKeyProvider(secret: .passphrase("ops"))   // one key derivation for the whole copy
        let db = FMDatabase(path: "app.db")
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: provider)
        try db.attachDatabase(atPath: "copy.db", schema: "copy", keyProvider: provider.creatingDatabase(at: "copy.db"),
                              settings: CipherSettings(pageSize: 4096))
        try db.exportContents(to: "copy")
        try db.detachDatabase(schema: "copy")
        // End of the article's block.
        db.close()
    }

    // BindingAndReadingValues.md, "Throwing calls with typed arguments".
    func testBindingArticleTypedArguments() throws {
        let db = FMDatabase(path: directory.path("typed.sqlite"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        var printed: [String] = []
        func print(_ line: String) { printed.append(line) }
        // Article:
        try db.execute("CREATE TABLE IF NOT EXISTS people (id INTEGER PRIMARY KEY, name TEXT, email TEXT)")
        try db.execute("INSERT INTO people (name, email) VALUES (?, ?)", "Ada", nil as String?)
        let rs = try db.query("SELECT name FROM people WHERE id > ?", 0)
        while rs.next() { print(rs.string(forColumnIndex: 0) ?? "") }
        // End of the article's block.
        XCTAssertEqual(printed, ["Ada"])
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM people WHERE email IS NULL"), 1)
    }

    // CodableRows.md, "Binding an Encodable value" (its `Person` is the article's first block's).
    func testCodableArticleQueryByAnEncodable() throws {
        struct Person: Codable, Equatable {
            var id: Int64
            var name: String
            var email: String?
            var joined: Date
        }
        let db = FMDatabase(path: directory.path("codable.sqlite"))
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT, joined)")
        for (id, name) in [(1, "Ada"), (20, "Bob")] {
            try db.execute("INSERT INTO people VALUES (?, ?, NULL, 0)", id, name)
        }
        var printed: [String] = []
        func print(_ line: String) { printed.append(line) }
        // Article:
        struct AgeRange: Encodable { var low: Int; var high: Int }
        let rs = try db.executeQuery(
            "SELECT * FROM people WHERE id BETWEEN :low AND :high", encoding: AgeRange(low: 1, high: 10))
        while rs.next() { print(try rs.decode(Person.self).name) }
        // End of the article's block.
        XCTAssertEqual(printed, ["Ada"])
    }
}
