import FMDB
import Foundation
import TestSupport
import XCTest

/// The examples of the README and of FMDB.docc/GettingStarted.md, compiled and run as written (keep them in step).
final class ReadmeExamplesTests: FMDBCipherTestCase {
    func testReadmeUsage() throws {
        let path = directory.path("app.sqlite")

        // README: Open, key, write, read
        let db = FMDatabase(path: path)
        guard db.open() else { throw db.lastError() }
        try db.setKey(using: PassphraseKeyProvider("correct horse battery staple"))

        db.executeUpdate("CREATE TABLE IF NOT EXISTS people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)")
        db.executeUpdate("INSERT INTO people (name, age) VALUES (?, ?)", "Ada", 36)
        try db.executeUpdate("INSERT INTO people (name, age) VALUES (?, ?)", values: ["Grace", 45])
        db.executeUpdate(
            "INSERT INTO people (name, age) VALUES (:name, :age)",
            withParameterDictionary: ["name": "Linus", "age": 28])
        let name = "Margaret"
        db.executeUpdate(withFormat: "INSERT INTO people (name, age) VALUES (\(name), \(33))")

        if let rs = db.executeQuery("SELECT name, age FROM people WHERE age > ? ORDER BY age", 30) {
            while rs.next() {
                print(rs.string(forColumn: "name") ?? "", rs.int(forColumn: "age"))
            }
        }
        let count = db.int(forQuery: "SELECT count(*) FROM people")

        // README: Transactions and savepoints
        db.beginTransaction()
        db.executeUpdate("UPDATE people SET age = age + 1")
        db.commit()
        try db.inTransaction(.immediate) { db in
            try db.executeUpdate("INSERT INTO people (name, age) VALUES (?, ?)", values: ["Barbara", 41])
        }
        let error = db.inSavePoint { rollback in
            if !db.executeUpdate("DELETE FROM people") { rollback.pointee = true }
        }

        // README: Errors
        do {
            try db.executeUpdate("INSERT INTO nowhere VALUES (1)", values: nil)
        } catch let error as NSError {
            print(error.domain, error.code, error.localizedDescription)  // FMDatabase 1 no such table: nowhere
        }

        // README: Change the key
        guard db.rekey("a new passphrase") else { throw db.lastError() }
        db.close()

        XCTAssertEqual(count, 4)
        XCTAssertNil(error)
        let check = FMDatabase(path: path)
        XCTAssertTrue(check.open())
        XCTAssertNoThrow(try check.setKey(using: PassphraseKeyProvider("a new passphrase")))
        XCTAssertEqual(check.int(forQuery: "SELECT count(*) FROM people"), 0)
        check.close()
    }

    func testFMDBReadmeRemoveDiacriticsExample() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        // FMDB 2.7's README example, as written.
        db.makeFunctionNamed("RemoveDiacritics", arguments: 1) { context, argc, argv in
            guard db.valueType(argv[0]) == .text || db.valueType(argv[0]) == .null else {
                db.resultError("Expected string parameter", context: context)
                return
            }
            if let string = db.valueString(argv[0])?.folding(options: .diacriticInsensitive, locale: nil) {
                db.resultString(string, context: context)
            } else {
                db.resultNull(context: context)
            }
        }
        XCTAssertEqual(db.string(forQuery: "SELECT RemoveDiacritics('Crème Brûlée')"), "Creme Brulee")
        XCTAssertNil(db.string(forQuery: "SELECT RemoveDiacritics(NULL)"))
        XCTAssertNil(db.executeQuery("SELECT RemoveDiacritics(42)")?.next() == true ? "row" : nil)
        XCTAssertEqual(db.lastErrorMessage(), "Expected string parameter")
        db.close()
    }

    func testFunctionHelpersRoundTripEveryType() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        db.makeFunctionNamed("echo", arguments: 1) { context, _, argv in
            switch db.valueType(argv[0]) {
            case .integer: db.resultLong(db.valueLong(argv[0]), context: context)
            case .float: db.resultDouble(db.valueDouble(argv[0]), context: context)
            case .text: db.resultString(db.valueString(argv[0]) ?? "", context: context)
            case .blob: db.resultData(db.valueData(argv[0]) ?? Data(), context: context)
            case .null: db.resultNull(context: context)
            }
        }
        db.makeFunctionNamed("int32", arguments: 1) { context, _, argv in
            db.resultInt(db.valueInt(argv[0]), context: context)
        }
        db.makeFunctionNamed("toobig", arguments: 0) { context, _, _ in db.resultErrorTooBig(context: context) }
        db.makeFunctionNamed("nomem", arguments: 0) { context, _, _ in db.resultErrorNoMemory(context: context) }
        db.makeFunctionNamed("busy", arguments: 0) { context, _, _ in db.resultErrorCode(SQLITE_BUSY, context: context)
        }
        XCTAssertEqual(db.long(forQuery: "select echo(?)", Int64(1) << 40), 1 << 40)
        XCTAssertEqual(db.double(forQuery: "select echo(2.5)"), 2.5)
        XCTAssertEqual(db.string(forQuery: "select echo('tëxt')"), "tëxt")
        XCTAssertEqual(db.string(forQuery: "select typeof(echo(''))"), "text")
        XCTAssertEqual(db.data(forQuery: "select echo(x'00ff')"), Data([0, 255]))
        XCTAssertEqual(db.string(forQuery: "select typeof(echo(x''))"), "blob")
        XCTAssertEqual(db.string(forQuery: "select typeof(echo(NULL))"), "null")
        XCTAssertEqual(db.int(forQuery: "select int32(7)"), 7)
        XCTAssertEqual(db.int(forQuery: "select toobig()"), 0)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_TOOBIG)
        XCTAssertEqual(db.int(forQuery: "select nomem()"), 0)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_NOMEM)
        XCTAssertEqual(db.int(forQuery: "select busy()"), 0)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_BUSY)
        db.close()
    }
}

/// The queue and pool examples of the README and of FMDB.docc/QueuesAndPools.md, compiled and run as written.
final class ReadmeQueueAndPoolExamplesTests: FMDBCipherTestCase {
    func testReadmeKeysQueuesAndPools() async throws {
        let path = directory.path("store.sqlite")

        // README: A keyed queue
        let provider = PBKDF2KeyProvider(passphrase: "correct horse battery staple")  // derives once per file
        let queue = try FMDatabaseQueue(path: path, keyProvider: provider)  // wrong key: throws code 26
        queue.inDatabase { db in
            db.executeUpdate("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)")
        }
        queue.inTransaction { db, rollback in
            if !db.executeUpdate("INSERT INTO notes (body) VALUES (?)", "first") { rollback.pointee = true }
        }
        let count: Int32 = try queue.inDatabase { db in
            let rs = try db.executeQuery("SELECT count(*) FROM notes", values: nil)
            return rs.next() ? rs.int(forColumnIndex: 0) : 0
        }
        try queue.inTransaction(.immediate) { db in  // rolls back if it throws
            try db.executeUpdate("INSERT INTO notes (body) VALUES (?)", values: ["second"])
        }
        let bodies = try await queue.perform { db -> [String] in  // async: never blocks the pool
            var bodies: [String] = []
            if let rs = db.executeQuery("SELECT body FROM notes ORDER BY id") {
                while rs.next() { bodies.append(rs.string(forColumnIndex: 0) ?? "") }
            }
            return bodies
        }
        let total = try await queue.perform { db in db.int(forQuery: "SELECT count(*) FROM notes") }
        try await queue.rekey(using: PBKDF2KeyProvider(passphrase: "a new passphrase"))
        queue.close()

        // README: a pool whose connections are set up before any block gets them
        do {
            let provider = PBKDF2KeyProvider(passphrase: "a new passphrase")
            var configuration = FMDatabaseConfiguration(keyProvider: provider)
            configuration.prepareDatabase = { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil) }
            let pool = try FMDatabasePool(path: path, configuration: configuration)
            XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "PRAGMA foreign_keys") }, 1)
            pool.releaseAllDatabases()
        }

        // QueuesAndPools.md: A keyed pool
        let pool = try FMDatabasePool(path: path, keyProvider: PBKDF2KeyProvider(passphrase: "a new passphrase"))
        pool.maximumNumberOfDatabasesToCreate = 4
        pool.inDatabase { db in
            _ = db.string(forQuery: "PRAGMA journal_mode = WAL")
        }
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            pool.inDatabase { db in
                _ = db.int(forQuery: "SELECT count(*) FROM notes")
            }
        }

        // QueuesAndPools.md: the pool's transactions, throwing and FMDB forms
        do {
            try pool.inTransaction(.immediate) { db in
                try db.executeUpdate("INSERT INTO notes (body) VALUES (?)", values: ["from the pool"])
            }
        } catch {
            // Not started (busy: another process holds the lock; no connection), failed, or rolled back.
            XCTFail("\(error)")
        }
        pool.inTransaction { db, rollback in  // FMDB's form: when BEGIN fails the block is not called,
            _ = db.executeUpdate("INSERT INTO notes (body) VALUES (?)", "fmdb style")  // the error is logged
        }  // and kept in pool.lastError

        XCTAssertEqual(count, 1)
        XCTAssertEqual(bodies, ["first", "second"])
        XCTAssertEqual(total, 2)
        XCTAssertLessThanOrEqual(pool.countOfOpenDatabases, 4)
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM notes") }, 4)
    }
}

/// The fast-path example of FMDB.docc/GettingStarted.md, as written.
final class ReadmeFastPathExampleTests: XCTestCase {
    func testReadmeFastPath() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)"))
        var seen: [String] = []

        // GettingStarted.md: The fastest path
        let insert = try db.prepareStatement("INSERT INTO people (name, age) VALUES (?, ?)")
        try insert.execute("Barbara", 41)
        let lookup = try db.prepareStatement("SELECT name, age FROM people WHERE age > ?")
        try lookup.bind(40)
        while try lookup.step() {
            print(lookup.string(at: 0) ?? "", lookup.int(at: 1))
            seen.append("\(lookup.string(at: 0) ?? "") \(lookup.int(at: 1))")
        }

        XCTAssertEqual(seen, ["Barbara 41"])
    }
}
