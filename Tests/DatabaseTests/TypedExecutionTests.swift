import FMDB
import Foundation
import TestSupport
import XCTest

/// `execute(_:_:)` and `query(_:_:)`: throwing statement calls with typed arguments, none included.
/// Compiling this file without warnings is part of the test (`try db.execute("...")` with no arguments
/// throws, so its `try` is needed).
final class TypedExecutionTests: FMDBTempDBTestCase {
    func testCallsWithoutArgumentsNeedNoValues() throws {
        try db.execute("CREATE TABLE t (a INTEGER, b TEXT)")
        try db.execute("INSERT INTO t VALUES (1, 'one')")
        XCTAssertEqual(db.changes, 1)
        let rs = try db.query("SELECT a, b FROM t")
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.int(forColumn: "a"), 1)
        XCTAssertEqual(rs.string(forColumn: "b"), "one")
        XCTAssertFalse(rs.next())
        // FMDB's own form is unchanged: no `try`, a Bool.
        XCTAssertTrue(db.executeUpdate("DELETE FROM t"))
    }

    func testSeveralTypedValuesBindInOrder() throws {
        try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, f INTEGER, u INTEGER)")
        try db.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", Int64.max, 2.5, "tëxt", Data([1, 2, 3]), true, UInt8(7))
        let rs = try db.query("SELECT i, r, s, b, f, u, typeof(b) FROM t WHERE s = ? AND i > ?", "tëxt", 0)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.longLongInt(forColumnIndex: 0), Int64.max)
        XCTAssertEqual(rs.double(forColumnIndex: 1), 2.5)
        XCTAssertEqual(rs.string(forColumnIndex: 2), "tëxt")
        XCTAssertEqual(rs.data(forColumnIndex: 3), Data([1, 2, 3]))
        XCTAssertTrue(rs.bool(forColumnIndex: 4))
        XCTAssertEqual(rs.int(forColumnIndex: 5), 7)
        XCTAssertEqual(rs.string(forColumnIndex: 6), "blob")
        rs.close()
    }

    func testNilOptionalsBindNull() throws {
        try db.execute("CREATE TABLE t (a TEXT, b INTEGER)")
        let missing: String? = nil
        try db.execute("INSERT INTO t VALUES (?, ?)", missing, Int?.some(4))
        try db.execute("INSERT INTO t VALUES (?, ?)", "x", nil as Int?)
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t WHERE a IS NULL AND b = 4"), 1)
        XCTAssertEqual(db.int(forQuery: "SELECT count(*) FROM t WHERE a = 'x' AND b IS NULL"), 1)
        let rs = try db.query("SELECT count(*) FROM t WHERE a IS ?", missing)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.int(forColumnIndex: 0), 1)
        rs.close()
    }

    func testADateBindsAsTheFMDBFormsBindIt() throws {
        try db.execute("CREATE TABLE t (d)")
        let date = Date(timeIntervalSince1970: 1_000)
        try db.execute("INSERT INTO t VALUES (?)", date)
        XCTAssertEqual(db.string(forQuery: "SELECT typeof(d) FROM t"), "real")
        XCTAssertEqual(db.double(forQuery: "SELECT d FROM t"), 1_000)

        // With a date format, the text in it, as executeUpdate(_:values:) and PreparedStatement bind it.
        db.setDateFormat(FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss"))
        try db.execute("DELETE FROM t")
        try db.execute("INSERT INTO t VALUES (?)", date)
        try db.executeUpdate("INSERT INTO t VALUES (?)", values: [date])
        let insert = try db.prepareStatement("INSERT INTO t VALUES (?)")
        try insert.execute(date)
        let rs = try db.query("SELECT d, typeof(d) FROM t")
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertEqual(rs.string(forColumnIndex: 0), "1970-01-01 00:16:40")
            XCTAssertEqual(rs.string(forColumnIndex: 1), "text")
            XCTAssertEqual(rs.date(forColumnIndex: 0), date)
        }
        XCTAssertEqual(rows, 3)
    }

    func testErrorsAreThrownWithSQLitesCodeAndKeptForLastError() throws {
        try db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
        try db.execute("INSERT INTO t VALUES (?)", 1)
        XCTAssertThrowsError(try db.execute("INSERT INTO t VALUES (?)", 1)) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_CONSTRAINT)
            XCTAssertEqual(($0 as NSError).domain, "FMDatabase")
        }
        XCTAssertEqual(db.lastErrorCode(), SQLITE_CONSTRAINT)
        // A count of values that does not match the parameters, either way: SQLITE_RANGE.
        XCTAssertThrowsError(try db.execute("INSERT INTO t VALUES (?)")) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_RANGE)
        }
        XCTAssertThrowsError(try db.query("SELECT a FROM t WHERE a = ?", 1, 2)) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_RANGE)
        }
        XCTAssertThrowsError(try db.query("SELEC nothing")) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_ERROR)
        }
        XCTAssertEqual(db.lastErrorCode(), SQLITE_ERROR)
        // Rows where none are expected, and a closed database: SQLITE_MISUSE.
        XCTAssertThrowsError(try db.execute("SELECT 1")) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_MISUSE)
        }
        // A success clears the last error.
        try db.execute("DELETE FROM t")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_OK)
        db.close()
        XCTAssertThrowsError(try db.execute("DELETE FROM t")) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_MISUSE)
        }
        XCTAssertThrowsError(try db.query("SELECT 1")) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_MISUSE)
        }
    }

    func testCachedStatementsAreReusedAndNotLeftOpen() throws {
        db.shouldCacheStatements = true
        try db.execute("CREATE TABLE t (a INTEGER)")
        for value in 0..<3 { try db.execute("INSERT INTO t VALUES (?)", value) }
        for value in 0..<3 {
            let rs = try db.query("SELECT a FROM t WHERE a = ?", value)
            XCTAssertTrue(rs.next())
            XCTAssertEqual(rs.int(forColumnIndex: 0), Int32(value))
            XCTAssertFalse(rs.next())
        }
        XCTAssertFalse(db.hasOpenResultSets)
    }
}
