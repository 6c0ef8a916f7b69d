import FMDB
import Foundation
import TestSupport
import XCTest

final class PreparedStatementTests: XCTestCase {
    func testTypedBindAndRead() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, i integer, r real, s text, b blob, n)"))
        let insert = try db.prepareStatement("insert into t (i, r, s, b, n) values (?, ?, ?, ?, ?)")
        XCTAssertEqual(insert.parameterCount, 5)
        let none: String? = nil
        try insert.execute(Int64.max, 2.5, "tëxt\u{0}x", Data([1, 2, 3]), none)
        try insert.execute(UInt64.max, Float(1.5), "", [UInt8](), NSNull())
        try insert.execute(true, Double.infinity, Optional("opt"), Data(), Int8(-3))
        let select = try db.prepareStatement("select i, r, s, b, n from t order by id")
        XCTAssertEqual(select.columnCount, 5)
        XCTAssertEqual(select.columnIndex(named: "S"), 2)
        try select.bind()
        XCTAssertTrue(try select.step())
        XCTAssertEqual(select.int64(at: 0), Int64.max)
        XCTAssertEqual(select.double(at: 1), 2.5)
        XCTAssertEqual(select.string(at: 2), "tëxt\u{0}x")
        XCTAssertEqual(select.data(at: 3), Data([1, 2, 3]))
        XCTAssertTrue(select.isNull(at: 4))
        XCTAssertNil(select.data(at: 4))
        select.withUnsafeBytes(at: 4) { XCTAssertNil($0, "NULL has no bytes") }
        select.withUnsafeBytes(at: 0) {
            XCTAssertEqual($0.map { Array($0) }, Array("9223372036854775807".utf8), "an integer's text")
        }
        XCTAssertTrue(try select.step())
        XCTAssertEqual(UInt64(bitPattern: select.int64(at: 0)), UInt64.max)
        XCTAssertEqual(select.string(at: 2), "")
        XCTAssertFalse(select.isNull(at: 3), "an empty blob stays a blob")
        XCTAssertEqual(select.data(at: 3), Data())
        select.withUnsafeBytes(at: 3) { XCTAssertEqual($0?.count, 0, "an empty blob: empty bytes, not nil") }
        select.withUnsafeBytes(at: 2) { XCTAssertEqual($0?.count, 0, "empty text: empty bytes, not nil") }
        XCTAssertTrue(try select.step())
        XCTAssertEqual(select.int(at: 0), 1)
        XCTAssertEqual(select.string(at: 2), "opt")
        XCTAssertEqual(select.int64(at: 4), -3)
        select.withUnsafeBytes(at: 2) { XCTAssertEqual($0?.count, 3) }
        XCTAssertFalse(try select.step())
        // After the end the statement resets itself and can run again.
        XCTAssertTrue(try select.step())
        select.reset()
    }

    func testColumnNamesAndByteCountsReadTheColumnAsked() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        let select = try db.prepareStatement(
            "select x'010203' as first, 'four' as second, NULL as third, x'' as fourth, 12345 as fifth, 'héllo' as "
                + "sixth"
        )
        XCTAssertEqual(
            (0..<select.columnCount).map { select.columnName(at: $0) },
            ["first", "second", "third", "fourth", "fifth", "sixth"])
        XCTAssertNil(select.columnName(at: 6), "past the last column")
        XCTAssertNil(select.columnName(at: -1))
        XCTAssertTrue(try select.step())
        // Each column's own length, in bytes (UTF-8 for text, the text form of a number).
        XCTAssertEqual((0..<select.columnCount).map { select.byteCount(at: $0) }, [3, 4, 0, 0, 5, 6])
    }

    func testBindErrorsAreCleanErrors() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (a integer primary key)"))
        let insert = try db.prepareStatement("insert into t values (?)")
        XCTAssertThrowsError(try insert.execute(1, 2)) { XCTAssertEqual(nsError($0).code, Int(SQLITE_RANGE)) }
        XCTAssertThrowsError(try insert.execute()) { XCTAssertEqual(nsError($0).code, Int(SQLITE_RANGE)) }
        try insert.execute(1)
        XCTAssertThrowsError(try insert.execute(1)) { XCTAssertEqual(nsError($0).code, Int(SQLITE_CONSTRAINT)) }
        XCTAssertThrowsError(try db.prepareStatement("select nonsense from")) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_ERROR))
        }
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 1)
        db.close()
        XCTAssertThrowsError(try insert.execute(2)) { XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE)) }
        XCTAssertThrowsError(try insert.step())
        XCTAssertThrowsError(try db.prepareStatement("select 1"))
    }

    func testTooBigValuesAreRefused() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        _ = db.limit(for: SQLITE_LIMIT_LENGTH, value: 1000)
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        let insert = try db.prepareStatement("insert into t values (?)")
        XCTAssertThrowsError(try insert.execute(Data(count: 5000))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_TOOBIG))
        }
        XCTAssertThrowsError(try insert.execute(String(repeating: "x", count: 5000))) {
            XCTAssertEqual(nsError($0).code, Int(SQLITE_TOOBIG))
        }
    }
}
