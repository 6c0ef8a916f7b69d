@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// The row decoder keeps one keyed container across rows (no allocation per row); the container holds
/// the decoder, so closing the result set must let both go.
final class CodableRowDecoderReuseTests: FMDBTempDBTestCase {
    struct Row: Decodable, Equatable {
        var id: Int64
        var name: String?
    }

    struct Other: Decodable, Equatable {
        var name: String
    }

    func testRowsDecodeThroughOneContainerAndTheDecoderIsFreedOnClose() throws {
        try db.executeUpdate("CREATE TABLE t (id INTEGER, name TEXT)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1, 'a'), (2, NULL), (3, 'c')", values: nil)
        weak var decoder: RowDecoder?
        do {
            let rs = try db.executeQuery("SELECT id, name FROM t ORDER BY id", values: nil)
            var rows: [Row] = []
            while rs.next() {
                rows.append(try rs.decode(Row.self))
                decoder = rs.rowDecoder
            }
            XCTAssertEqual(rows, [Row(id: 1, name: "a"), Row(id: 2, name: nil), Row(id: 3, name: "c")])
            rs.close()
        }
        XCTAssertNil(decoder, "the cached container kept the decoder alive")
    }

    func testAnotherKeyTypeOnTheSameResultSetGetsItsOwnContainer() throws {
        try db.executeUpdate("CREATE TABLE t (id INTEGER, name TEXT)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1, 'a'), (2, 'b')", values: nil)
        let rs = try db.executeQuery("SELECT id, name FROM t ORDER BY id", values: nil)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(Row.self), Row(id: 1, name: "a"))
        XCTAssertEqual(try rs.decode(Other.self), Other(name: "a"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(try rs.decode(Other.self), Other(name: "b"))
        XCTAssertEqual(try rs.decode(Row.self), Row(id: 2, name: "b"))
        rs.close()
    }
}
