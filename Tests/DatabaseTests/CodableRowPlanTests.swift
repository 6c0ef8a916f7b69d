import FMDB
import Foundation
import TestSupport
import XCTest

/// The row decoder resolves each key's column once per key type and result set, then reads by that plan:
/// what the plan could get wrong — another type on the same rows, other column orders, a statement SQLite
/// prepares again with other columns, keys asked in another order, a container kept too long.
final class CodableRowPlanTests: FMDBTempDBTestCase {
    struct AB: Decodable, Equatable {
        var a: Int64
        var b: String
    }

    /// The same columns, its keys declared and asked for the other way round.
    struct BA: Decodable, Equatable {
        var b: String
        var a: Int64
    }

    struct OnlyB: Decodable, Equatable {
        var b: String
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try db.executeUpdate("CREATE TABLE t (a INTEGER, b TEXT)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1, 'x'), (2, 'y')", values: nil)
    }

    func testTwoTypesWithTheirKeysInOtherOrdersReadTheirOwnColumnsOnOneResultSet() throws {
        let rs = try db.executeQuery("SELECT a, b FROM t ORDER BY a", values: nil)
        defer { rs.close() }
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(AB.self), AB(a: 1, b: "x"))
        XCTAssertEqual(try rs.decode(BA.self), BA(b: "x", a: 1))
        XCTAssertEqual(try rs.decode(OnlyB.self), OnlyB(b: "x"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(BA.self), BA(b: "y", a: 2))
        XCTAssertEqual(try rs.decode(OnlyB.self), OnlyB(b: "y"))
        XCTAssertEqual(try rs.decode(AB.self), AB(a: 2, b: "y"))
    }

    func testOneTypeFromStatementsWithTheirColumnsInOtherOrders() throws {
        db.shouldCacheStatements = true
        for _ in 0..<2 {
            XCTAssertEqual(
                try db.fetchAll(AB.self, "SELECT a, b FROM t ORDER BY a"), [AB(a: 1, b: "x"), AB(a: 2, b: "y")])
            XCTAssertEqual(
                try db.fetchAll(AB.self, "SELECT b, a FROM t ORDER BY a"), [AB(a: 1, b: "x"), AB(a: 2, b: "y")])
            XCTAssertEqual(
                try db.fetchAll(AB.self, "SELECT 0 AS z, b, 7 AS y, a FROM t ORDER BY a"),
                [AB(a: 1, b: "x"), AB(a: 2, b: "y")])
        }
    }

    /// A cached `SELECT *` after its table was recreated with the columns in another order: SQLite prepares
    /// the statement again at its first step, and names must be looked up in the new columns (by the
    /// decoder and by the getters by name alike).
    func testACachedStatementPreparedAgainAfterASchemaChangeIsReadByItsNewColumns() throws {
        db.shouldCacheStatements = true
        XCTAssertEqual(try db.fetchAll(AB.self, "SELECT * FROM t WHERE a = 1"), [AB(a: 1, b: "x")])
        try db.executeUpdate("DROP TABLE t", values: nil)
        try db.executeUpdate("CREATE TABLE t (b TEXT, a INTEGER)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES ('z', 1)", values: nil)
        XCTAssertEqual(try db.fetchAll(AB.self, "SELECT * FROM t WHERE a = 1"), [AB(a: 1, b: "z")])
        let rs = try db.executeQuery("SELECT * FROM t WHERE a = 1", values: nil)
        defer { rs.close() }
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.longLongInt(forColumn: "a"), 1)
        XCTAssertEqual(rs.string(forColumn: "b"), "z")
    }

    /// A result set from `prepare` run again with a new bind after the schema changed.
    func testAReusableResultSetBoundAgainAfterASchemaChangeIsReadByItsNewColumns() throws {
        let rs = try XCTUnwrap(db.prepare("SELECT * FROM t WHERE a = ?"))
        defer { rs.close() }
        XCTAssertTrue(rs.bind(withArray: [1]))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(AB.self), AB(a: 1, b: "x"))
        XCTAssertEqual(rs.string(forColumn: "b"), "x")
        XCTAssertFalse(rs.next())
        try db.executeUpdate("DROP TABLE t", values: nil)
        try db.executeUpdate("CREATE TABLE t (b TEXT, a INTEGER)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES ('z', 1)", values: nil)
        XCTAssertTrue(rs.bind(withArray: [1]))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(AB.self), AB(a: 1, b: "z"))
        XCTAssertEqual(rs.string(forColumn: "b"), "z")
    }

    /// An `init(from:)` that asks for its keys in an order that depends on the row.
    struct Swapping: Decodable, Equatable {
        var a: Int64
        var b: String
        enum CodingKeys: String, CodingKey { case a, b }
        init(a: Int64, b: String) {
            self.a = a
            self.b = b
        }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if try container.decode(Int64.self, forKey: .a) == 1 {
                a = 1
                b = try container.decode(String.self, forKey: .b)
            } else {
                b = try container.decode(String.self, forKey: .b)
                a = try container.decode(Int64.self, forKey: .a)
            }
        }
    }

    /// The same, with keys that are structs holding a string (not a synthesized enum).
    struct NamedKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    struct SwappingNamed: Decodable, Equatable {
        var a: Int64
        var b: String
        init(a: Int64, b: String) {
            self.a = a
            self.b = b
        }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: NamedKey.self)
            let first = try container.decode(Int64.self, forKey: NamedKey(stringValue: "a"))
            if first == 1 {
                a = first
                b = try container.decode(String.self, forKey: NamedKey(stringValue: "b"))
            } else {
                b = try container.decode(String.self, forKey: NamedKey(stringValue: "b"))
                a = try container.decode(Int64.self, forKey: NamedKey(stringValue: "a"))
            }
        }
    }

    func testKeysAskedInAnotherOrderOnAnotherRowFindTheirColumns() throws {
        try db.executeUpdate("INSERT INTO t VALUES (3, 'w')", values: nil)
        let expected: [(Int64, String)] = [(1, "x"), (2, "y"), (3, "w"), (1, "x")]
        let sql = "SELECT a, b FROM t UNION ALL SELECT a, b FROM t WHERE a = 1"
        XCTAssertEqual(try db.fetchAll(Swapping.self, sql), expected.map { Swapping(a: $0.0, b: $0.1) })
        XCTAssertEqual(try db.fetchAll(SwappingNamed.self, sql), expected.map { SwappingNamed(a: $0.0, b: $0.1) })
    }

    struct One: Decodable, Equatable {
        var b: String
    }

    func testAKeyEnumWithOneCase() throws {
        XCTAssertEqual(try db.fetchAll(One.self, "SELECT a, b FROM t ORDER BY a"), [One(b: "x"), One(b: "y")])
    }

    /// Kept by `Keeper.init(from:)`: only the test's thread touches it.
    nonisolated(unsafe) static var kept: KeyedDecodingContainer<Keeper.CodingKeys>?

    struct Keeper: Decodable {
        var a: Int64
        enum CodingKeys: String, CodingKey { case a }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            a = try container.decode(Int64.self, forKey: .a)
            CodableRowPlanTests.kept = container
        }
    }

    func testAContainerKeptPastItsInitThrowsInsteadOfReading() throws {
        let rs = try db.executeQuery("SELECT a, b FROM t ORDER BY a", values: nil)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(Keeper.self).a, 1)
        let container = try XCTUnwrap(Self.kept)
        Self.kept = nil
        XCTAssertThrowsError(try container.decode(Int64.self, forKey: .a)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_MISUSE))
        }
        rs.close()
        XCTAssertThrowsError(try container.decodeIfPresent(Int64.self, forKey: .a)) { error in
            XCTAssertEqual((error as NSError).code, Int(SQLITE_MISUSE))
        }
        XCTAssertFalse(container.contains(.a))
    }

    /// The rows of one statement can come from other places in SQLite's program: here the two arms of a
    /// compound SELECT with ORDER BY take turns (EXPLAIN shows a ResultRow for each), and each row must
    /// be read from its own.
    func testRowsFromAlternatingArmsOfACompoundSelectReadTheirOwnValues() throws {
        let sql = "SELECT a * 2 - 1 AS a, b FROM t UNION ALL SELECT a * 2, b || 'z' FROM t ORDER BY 1"
        XCTAssertEqual(
            try db.fetchAll(AB.self, sql),
            [AB(a: 1, b: "x"), AB(a: 2, b: "xz"), AB(a: 3, b: "y"), AB(a: 4, b: "yz")])
    }

    /// Steps `target` from inside its `init(from:)`, between its two properties.
    struct StepsItsResultSet: Decodable, Equatable {
        nonisolated(unsafe) static var target: FMResultSet?
        var a: Int64
        var b: String

        enum CodingKeys: String, CodingKey { case a, b }

        init(a: Int64, b: String) { (self.a, self.b) = (a, b) }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            a = try container.decode(Int64.self, forKey: .a)
            XCTAssertEqual(Self.target?.next(), true)
            b = try container.decode(String.self, forKey: .b)
        }
    }

    /// A property read after the result set stepped reads the new row (from the other arm's registers
    /// here), not the values found for the row the decode began on.
    func testAPropertyReadAfterTheResultSetSteppedReadsTheNewRow() throws {
        let rs = try db.executeQuery(
            "SELECT a * 2 - 1 AS a, b FROM t UNION ALL SELECT a * 2, b || 'z' FROM t ORDER BY 1", values: nil)
        StepsItsResultSet.target = rs
        defer { StepsItsResultSet.target = nil }
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(StepsItsResultSet.self), StepsItsResultSet(a: 1, b: "xz"))
        rs.close()
    }
}
