@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// The result set keeps one row decoder across rows; its containers hold the decoder, so closing the
/// result set must let it go, and a container used past that throws.
final class CodableRowDecoderReuseTests: FMDBTempDBTestCase {
    struct Row: Decodable, Equatable {
        var id: Int64
        var name: String?
    }

    struct Other: Decodable, Equatable {
        var name: String
    }

    func testRowsDecodeThroughOneDecoderThatIsFreedOnClose() throws {
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
        XCTAssertNil(decoder, "something kept the decoder alive")
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

    /// `Holder<T>.CodingKeys` is one key type per `T`, all with the same cases: each gets its own
    /// container, handed out as its own `KeyedDecodingContainer` type.
    struct Holder<Value: Decodable & Equatable>: Decodable, Equatable {
        var name: Value
    }

    /// Asks for the containers of two key types in turn, so the last one used never matches the next.
    struct Split: Decodable, Equatable {
        var id: Int64
        var name: String?

        enum IDKey: CodingKey { case id }
        enum NameKey: CodingKey { case name }

        init(id: Int64, name: String?) {
            self.id = id
            self.name = name
        }

        init(from decoder: any Decoder) throws {
            id = try decoder.container(keyedBy: IDKey.self).decode(Int64.self, forKey: .id)
            name = try decoder.container(keyedBy: NameKey.self).decodeIfPresent(String.self, forKey: .name)
        }
    }

    func testKeyTypesOfOneGenericTypeAndOfOneInitEachGetTheirOwnContainer() throws {
        try db.executeUpdate("CREATE TABLE t (id INTEGER, name TEXT)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1, 'a'), (2, NULL), (3, '3')", values: nil)
        let rs = try db.executeQuery("SELECT id, name FROM t ORDER BY id", values: nil)
        var split: [Split] = []
        var texts: [Holder<String>?] = []
        var optionals: [Holder<String?>] = []
        while rs.next() {
            split.append(try rs.decode(Split.self))
            texts.append(try? rs.decode(Holder<String>.self))
            optionals.append(try rs.decode(Holder<String?>.self))
            split.append(try rs.decode(Split.self))
        }
        rs.close()
        XCTAssertEqual(
            split,
            [
                Split(id: 1, name: "a"), Split(id: 1, name: "a"), Split(id: 2, name: nil), Split(id: 2, name: nil),
                Split(id: 3, name: "3"), Split(id: 3, name: "3"),
            ])
        XCTAssertEqual(texts, [Holder(name: "a"), nil, Holder(name: "3")])
        XCTAssertEqual(optionals, [Holder(name: "a"), Holder(name: nil), Holder(name: "3")])
    }

    /// Closes `target` from inside its `init(from:)`, between asking for the container and reading it.
    struct ClosesItsResultSet: Decodable {
        nonisolated(unsafe) static var target: FMResultSet?
        var id: Int64

        enum CodingKeys: CodingKey { case id }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            Self.target?.close()
            id = try container.decode(Int64.self, forKey: .id)
        }
    }

    func testAnInitThatClosesItsResultSetGetsMisuseAndTheDecoderOutlivesIt() throws {
        try db.executeUpdate("CREATE TABLE t (id INTEGER)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1), (2)", values: nil)
        let rs = try db.executeQuery("SELECT id FROM t ORDER BY id", values: nil)
        XCTAssertTrue(rs.next())
        ClosesItsResultSet.target = rs
        defer { ClosesItsResultSet.target = nil }
        XCTAssertThrowsError(try rs.decode(ClosesItsResultSet.self)) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.code, Int(SQLITE_MISUSE))
        }
        XCTAssertNil(rs.rowDecoder)
        XCTAssertFalse(rs.next())
    }
}
