import FMDB
import Foundation
import XCTest

/// The typed binder (`execute(_:_:)`, `query(_:_:)`, `PreparedStatement.bind`): a value it cannot bind
/// fails the call with SQLite's code, and a statement bound again starts over.
final class TypedBindingTests: XCTestCase {
    /// A value over SQLite's length limit fails the call; nothing runs with NULL in its place.
    func testAValueOverSQLitesLengthLimitFailsTheCallAndWritesNothing() throws {
        let db = FMDatabase(path: nil)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.execute("create table t (v text)")
        let handle = try XCTUnwrap(db.sqliteHandle)
        sqlite3_limit(OpaquePointer(handle), SQLITE_LIMIT_LENGTH, 1_000)
        let long = String(repeating: "x", count: 2_000)
        XCTAssertThrowsError(try db.execute("insert into t values (?)", long)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_TOOBIG), "\(error)")
        }
        XCTAssertThrowsError(try db.query("select ? is null", long)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_TOOBIG), "\(error)")
        }
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 0, "no row with NULL in place of the value")
    }

    /// A prepared statement bound again before its rows ran out starts over with the new values.
    func testAStatementBoundAgainMidwayStartsOver() throws {
        let db = FMDatabase(path: nil)
        XCTAssertTrue(db.open())
        defer { db.close() }
        let statement = try db.prepareStatement("select ? union all select 0")
        try statement.bind(1)
        XCTAssertTrue(try statement.step())
        XCTAssertEqual(statement.int(at: 0), 1)
        try statement.bind(2)
        XCTAssertTrue(try statement.step())
        XCTAssertEqual(statement.int(at: 0), 2, "the first row again, with the new value")
    }
}
