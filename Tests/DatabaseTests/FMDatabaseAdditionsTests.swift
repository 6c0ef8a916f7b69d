import FMDB
import Foundation
import TestSupport
import XCTest

/// A port of FMDB's Tests/FMDatabaseAdditionsTests.m.
final class FMDatabaseAdditionsTests: FMDBTempDBTestCase {
    func testFunkyTableNames() throws {
        db.executeUpdate("create table '234 fds' (foo text)")
        XCTAssertFalse(db.hadError(), "table creation should have succeeded")
        let rs = try XCTUnwrap(db.getTableSchema("234 fds"))
        XCTAssertTrue(rs.next(), "Schema should have succeded")
        XCTAssertEqual(rs.string(forColumn: "name"), "foo")
        rs.close()
        XCTAssertFalse(db.hadError(), "There shouldn't be any errors")
    }

    func testTableNameWithQuoteCannotInject() throws {
        XCTAssertTrue(db.executeUpdate("create table 'it''s' (foo text)"))
        XCTAssertTrue(db.columnExists("foo", inTableWithName: "it's"))
        XCTAssertTrue(db.tableExists("IT'S"))
        XCTAssertFalse(db.columnExists("foo", inTableWithName: "x'); drop table 'it''s"))
        XCTAssertTrue(db.tableExists("it's"))
    }

    func testBoolForQuery() {
        XCTAssertTrue(db.bool(forQuery: "SELECT ? not null", ""), "Empty strings should be considered true")
        XCTAssertTrue(
            db.bool(forQuery: "SELECT ? not null", NSMutableData()), "Empty mutable data should be considered true")
        XCTAssertTrue(db.bool(forQuery: "SELECT ? not null", Data()), "Empty data should be considered true")
        XCTAssertFalse(db.bool(forQuery: "SELECT ? not null", nil))
    }

    func testIntForQuery() {
        db.executeUpdate("create table t1 (a integer)")
        db.executeUpdate("insert into t1 values (?)", NSNumber(value: 5))
        XCTAssertEqual(db.changes, 1, "There should only be one change")
        XCTAssertEqual(db.int(forQuery: "select a from t1 where a = ?", NSNumber(value: 5)), 5)
        XCTAssertEqual(db.long(forQuery: "select a * 1000000000000 from t1"), 5_000_000_000_000)
        XCTAssertEqual(db.double(forQuery: "select a / 2.0 from t1"), 2.5)
        XCTAssertEqual(db.string(forQuery: "select 'x' || a from t1"), "x5")
        XCTAssertEqual(db.data(forQuery: "select x'0102'"), Data([1, 2]))
        XCTAssertEqual(db.int(forQuery: "select a from t1 where a = 99"), 0)
        XCTAssertNil(db.string(forQuery: "select a from t1 where a = 99"))
    }

    func testDateForQuery() throws {
        let date = Date()
        db.executeUpdate("create table datetest (a double, b double, c double)")
        db.executeUpdate("insert into datetest (a, b, c) values (?, ?, 0)", NSNull(), date)
        let foo = try XCTUnwrap(db.date(forQuery: "select b from datetest where c = 0"))
        XCTAssertEqual(foo.timeIntervalSince(date), 0.0, accuracy: 1.0)
    }

    func testValidate() {
        XCTAssertNoThrow(try db.validateSQL("create table datetest (a double, b double, c double)"))
        XCTAssertFalse(db.tableExists("datetest"), "validating must not run the statement")
    }

    func testFailValidate() {
        XCTAssertThrowsError(try db.validateSQL("blah blah blah")) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_ERROR))
        }
    }

    func testTableExists() throws {
        XCTAssertTrue(db.executeUpdate("create table t4 (a text, b text)"))
        XCTAssertTrue(db.tableExists("t4"))
        XCTAssertTrue(db.tableExists("T4"))
        XCTAssertFalse(db.tableExists("thisdoesntexist"))
        let rs = try XCTUnwrap(db.getSchema())
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertEqual(rs.string(forColumn: "type"), "table")
            XCTAssertEqual(rs.string(forColumn: "name"), "t4")
        }
        XCTAssertEqual(rows, 1)
    }

    func testColumnExists() {
        db.executeUpdate("create table nulltest (a text, b text)")
        XCTAssertTrue(db.columnExists("a", inTableWithName: "nulltest"))
        XCTAssertTrue(db.columnExists("B", inTableWithName: "nulltest"))
        XCTAssertFalse(db.columnExists("c", inTableWithName: "nulltest"))
    }

    func testUserVersion() {
        db.userVersion = 12
        XCTAssertEqual(db.userVersion, 12)
        db.userVersion = UInt32.max
        XCTAssertEqual(db.userVersion, UInt32.max)
    }

    func testApplicationID() {
        let appID: UInt32 = 0x666D_6462  // 'fmdb'
        db.applicationID = appID
        XCTAssertEqual(db.applicationID, appID)
        XCTAssertEqual(db.applicationIDString, "fmdb")
        db.applicationIDString = "acrn"
        XCTAssertEqual(db.applicationIDString, "acrn")
        db.applicationIDString = "toolong"
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertEqual(db.applicationIDString, "acrn")
    }
}
