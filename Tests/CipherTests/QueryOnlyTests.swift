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
}
