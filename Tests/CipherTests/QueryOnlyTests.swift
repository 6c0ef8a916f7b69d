import FMDB
import Foundation
import TestSupport
import XCTest

/// `makeQueryOnly()`: SQL may read, and nothing it runs changes the file or undoes the hold.
final class QueryOnlyTests: FMDBCipherTestCase {
    func testAQueryOnlyConnectionRefusesWritesAndFileChangingPragmas() throws {
        let file = path("q.db")
        let writer = FMDatabase(path: file)
        XCTAssertTrue(writer.open())
        try writer.executeUpdate("CREATE TABLE t (a)", values: nil)
        try writer.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
        writer.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: file))

        let db = FMDatabase(path: file)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertFalse(db.isQueryOnly)
        try db.makeQueryOnly()
        XCTAssertTrue(db.isQueryOnly)
        for sql in [
            "PRAGMA journal_mode = WAL", "PRAGMA query_only = 0", "INSERT INTO t VALUES (2)", "VACUUM",
            "PRAGMA wal_checkpoint", "CREATE TEMP TABLE x (a)", "ATTACH ':memory:' AS m",
            "SELECT * FROM pragma_journal_mode('wal')",
        ] {
            XCTAssertThrowsError(try db.executeUpdate(sql, values: nil), sql) { error in
                // SQLite 3.15 (SQLCipher 3.4.1) has no pragma table functions: "no such table" there.
                let allowed = sql.hasPrefix("SELECT") ? [Int(SQLITE_AUTH), Int(SQLITE_ERROR)] : [Int(SQLITE_AUTH)]
                XCTAssertTrue(allowed.contains((error as NSError).code), "\(sql): \(error)")
            }
        }
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t"), 1)
        let info = try db.executeQuery("PRAGMA table_info(t)", values: nil)
        XCTAssertTrue(info.next())
        info.close()
        db.close()
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), before, "the file did not change")
    }
    /// Reading a virtual table runs statements its module compiles for itself (R-tree prepares its shadow
    /// tables' INSERT and DELETE; connecting one reports an UPDATE of sqlite_master): a query-only
    /// connection reads FTS3, FTS4, FTS5 (where compiled in) and R-tree tables, keyed or not, through
    /// prepared statements and sqlite3_exec, and still refuses every write to them.
    func testAQueryOnlyConnectionReadsVirtualTablesAndRefusesTheirWrites() throws {
        for keyed in [false, true] {
            let file = path("vtab-\(keyed).db")
            let writer = FMDatabase(path: file)
            XCTAssertTrue(writer.open())
            if keyed {
                try writer.setKey(using: PassphraseKeyProvider("k"), settings: CipherSettings(kdfIterations: 64_000))
            }
            var tables = ["f3": "fts3(a)", "f4": "fts4(a)", "r": "rtree(id, x0, x1)"]
            // FTS5 is compiled into some SQLCipher builds only: asked of the running one.
            if (try? writer.executeUpdate("CREATE VIRTUAL TABLE probe5 USING fts5(a)", values: nil)) != nil {
                try writer.executeUpdate("DROP TABLE probe5", values: nil)
                tables["f5"] = "fts5(a)"
            }
            for (name, module) in tables.sorted(by: { $0.key < $1.key }) {
                try writer.executeUpdate("CREATE VIRTUAL TABLE \(name) USING \(module)", values: nil)
                let row = module.hasPrefix("rtree") ? "(1, 2, 3)" : "('hello world')"
                try writer.executeUpdate("INSERT INTO \(name) VALUES \(row)", values: nil)
            }
            writer.close()
            let before = try Data(contentsOf: URL(fileURLWithPath: file))

            let db = FMDatabase(path: file)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            if keyed {
                try db.setKey(using: PassphraseKeyProvider("k"), settings: CipherSettings(kdfIterations: 64_000))
            }
            try db.makeQueryOnly()
            for name in tables.keys.sorted() {
                let query =
                    name == "r"
                    ? "SELECT id FROM r WHERE x0 >= 1" : "SELECT rowid FROM \(name) WHERE \(name) MATCH 'hello'"
                let rs = try db.executeQuery(query, values: nil)
                XCTAssertTrue(try rs.nextWithError(), "\(name), keyed \(keyed)")
                XCTAssertEqual(rs.long(forColumnIndex: 0), 1)
                rs.close()
                var rows = 0
                XCTAssertTrue(
                    db.executeStatements("SELECT * FROM \(name)") { _ in
                        rows += 1
                        return 0
                    }, "\(name): \(db.lastError())")
                XCTAssertEqual(rows, 1, name)
                let write = name == "r" ? "INSERT INTO r VALUES (2, 3, 4)" : "INSERT INTO \(name) VALUES ('x')"
                for sql in [write, "DELETE FROM \(name)", "UPDATE \(name) SET rowid = 5"] {
                    XCTAssertThrowsError(try db.executeUpdate(sql, values: nil), sql) { error in
                        XCTAssertEqual((error as NSError).code, Int(SQLITE_AUTH), "\(sql): \(error)")
                    }
                    XCTAssertFalse(db.executeStatements(sql), sql)
                    let error = db.lastError()
                    XCTAssertEqual((error as NSError).code, Int(SQLITE_AUTH), "\(sql): \(error)")
                    XCTAssertTrue("\(error)".contains("answers queries only"), "\(sql): \(error)")
                }
            }
            XCTAssertEqual(try db.integrityProblems(), [])
            db.close()
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), before, "the file did not change")
        }
    }
}
