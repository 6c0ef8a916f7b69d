import FMDB
import Foundation
import TestSupport
import XCTest

/// Look-ups by column name after SQLite prepared a statement again: a schema change (a table recreated with
/// its columns renamed or in another order) gives `SELECT *` other columns at its next run, and every look-up
/// by name must see them, however many times that happened since the last look-up.
final class SchemaChangeColumnLookupTests: FMDBTempDBTestCase {
    /// The schemas the table goes through, over and over: the same two names in both orders, and other names
    /// between. A look-up that trusted maps from an earlier schema would find `a` at `b`'s place.
    private static let schemas = [("a", "b"), ("c", "d"), ("b", "a"), ("d", "c")]
    private static let rounds = 40

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Only the schema changes matter here, not their durability.
        db.executeStatements("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF")
        try db.executeUpdate("CREATE TABLE t (a TEXT, b TEXT)", values: nil)
    }

    /// Recreates `t` with `columns`, each holding its own name in capitals.
    private func recreateTable(_ columns: (String, String)) throws {
        try db.executeUpdate("DROP TABLE t", values: nil)
        try db.executeUpdate("CREATE TABLE t (\(columns.0) TEXT, \(columns.1) TEXT)", values: nil)
        try db.executeUpdate(
            "INSERT INTO t VALUES ('\(columns.0.uppercased())', '\(columns.1.uppercased())')", values: nil)
    }

    /// A cached `SELECT *` runs once per schema; its columns are looked up by name every other run, so between
    /// two look-ups SQLite prepared it again twice.
    func testACachedStatementPreparedAgainTwiceBetweenLookUpsFindsItsNewColumnsByName() throws {
        db.shouldCacheStatements = true
        for round in 0..<Self.rounds {
            for (position, columns) in Self.schemas.enumerated() {
                try recreateTable(columns)
                let rs = try db.executeQuery("SELECT * FROM t", values: nil)
                XCTAssertTrue(rs.next())
                if position.isMultiple(of: 2) {
                    XCTAssertEqual(rs.string(forColumn: columns.0), columns.0.uppercased(), "round \(round)")
                    XCTAssertEqual(rs.string(forColumn: columns.1), columns.1.uppercased(), "round \(round)")
                }
                rs.close()
            }
        }
    }

    /// The same through `PreparedStatement.columnIndex(named:)`, one statement run again and again.
    func testAPreparedStatementPreparedAgainTwiceBetweenLookUpsFindsItsNewColumnsByName() throws {
        let statement = try db.prepareStatement("SELECT * FROM t")
        for round in 0..<Self.rounds {
            for (position, columns) in Self.schemas.enumerated() {
                try recreateTable(columns)
                try statement.bind()
                XCTAssertTrue(try statement.step())
                if position.isMultiple(of: 2) {
                    XCTAssertEqual(statement.columnIndex(named: columns.0), 0, "round \(round)")
                    XCTAssertEqual(statement.columnIndex(named: columns.1), 1, "round \(round)")
                }
                statement.reset()
            }
        }
    }

    /// A name looked up before the first row: that first step may still prepare the statement again, and the
    /// look-ups on the row must see the columns it has then.
    func testALookUpBeforeTheFirstRowDoesNotOutliveTheStepThatPreparesTheStatementAgain() throws {
        db.shouldCacheStatements = true
        try recreateTable(("a", "b"))
        XCTAssertEqual(try db.executeQuery("SELECT * FROM t", values: nil).firstText(forColumn: "a"), "A")
        try recreateTable(("b", "a"))
        let rs = try db.executeQuery("SELECT * FROM t", values: nil)
        defer { rs.close() }
        _ = rs.columnIndex(forName: "a")
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.columnIndex(forName: "a"), 1)
        XCTAssertEqual(rs.string(forColumn: "a"), "A")
        XCTAssertEqual(rs.string(forColumn: "b"), "B")
    }

    /// A reusable result set (`prepare`) that `next()` runs again after its last row, without a bind: that run
    /// is prepared again after the schema change, and its names are looked up in its new columns.
    func testAReusableResultSetRunAgainByNextAfterASchemaChangeFindsItsNewColumnsByName() throws {
        try recreateTable(("a", "b"))
        let rs = try XCTUnwrap(db.prepare("SELECT * FROM t"))
        defer { rs.close() }
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "A")
        XCTAssertFalse(rs.next())
        try recreateTable(("b", "a"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "A")
        XCTAssertEqual(rs.string(forColumn: "b"), "B")
    }
}

extension FMResultSet {
    /// The first row's value of `column` (nil without a row); closes the set.
    fileprivate func firstText(forColumn column: String) -> String? {
        defer { close() }
        return next() ? string(forColumn: column) : nil
    }
}
