import FMDB
import Foundation
import TestSupport
import XCTest

/// An `Encodable` value bound to a SELECT (`executeQuery(_:encoding:)`), and the JSON form of nested
/// values (their dates follow JSONEncoder's and JSONDecoder's default strategy).
final class CodableQueryTests: FMDBTempDBTestCase {
    struct Person: Codable, Equatable {
        var id: Int64
        var name: String
        var age: Int
    }

    struct AgeRange: Encodable {
        var low: Int
        var high: Int
        var unused = "properties the SQL does not name are ignored"
    }

    private func createPeople() throws {
        try db.executeUpdate("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)", values: nil)
        for person in [
            Person(id: 1, name: "Ada", age: 36), Person(id: 2, name: "Bob", age: 12),
            Person(id: 3, name: "Cy", age: 70),
        ] {
            try db.executeUpdate("INSERT INTO people (id, name, age) VALUES (:id, :name, :age)", encoding: person)
        }
    }

    func testAnEncodableValueFiltersASelect() throws {
        try createPeople()
        let rs = try db.executeQuery(
            "SELECT * FROM people WHERE age BETWEEN :low AND :high ORDER BY id", encoding: AgeRange(low: 18, high: 65))
        var found: [Person] = []
        while rs.next() { found.append(try rs.decode(Person.self)) }
        XCTAssertEqual(found, [Person(id: 1, name: "Ada", age: 36)])
        XCTAssertFalse(db.hasOpenResultSets)
    }

    func testAParameterNoPropertyFillsIsAnError() throws {
        try createPeople()
        XCTAssertThrowsError(
            try db.executeQuery("SELECT * FROM people WHERE age > :minimum", encoding: AgeRange(low: 1, high: 2))
        ) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_RANGE)
        }
        XCTAssertEqual(db.lastErrorCode(), SQLITE_RANGE)
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertThrowsError(try db.executeQuery("SELEC :low", encoding: AgeRange(low: 1, high: 2))) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.resultCode, SQLITE_ERROR)
        }
    }

    struct Stamp: Codable, Equatable { var when: Date }
    struct Event: Codable, Equatable {
        var at: Date
        var stamp: Stamp
    }

    /// A top-level `Date` property binds seconds since 1970 (or the database's date format); a `Date` inside
    /// a nested value is JSON's: JSONEncoder's default strategy, seconds since 2001-01-01, whatever the
    /// date format. Both read back as written.
    func testNestedDatesUseJSONsDefaultStrategy() throws {
        try db.executeUpdate("CREATE TABLE events (at, stamp TEXT)", values: nil)
        let event = Event(
            at: Date(timeIntervalSince1970: 1_000), stamp: Stamp(when: Date(timeIntervalSinceReferenceDate: 86_400)))
        try db.executeUpdate("INSERT INTO events (at, stamp) VALUES (:at, :stamp)", encoding: event)
        db.setDateFormat(FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss"))
        try db.executeUpdate("INSERT INTO events (at, stamp) VALUES (:at, :stamp)", encoding: event)

        let rs = try db.executeQuery("SELECT at, stamp FROM events", values: nil)
        var rows = 0
        while rs.next() {
            rows += 1
            let json = try XCTUnwrap(rs.string(forColumn: "stamp")?.data(using: .utf8))
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: json) as? [String: Any])
            XCTAssertEqual((object["when"] as? NSNumber)?.doubleValue, 86_400, "seconds since 2001: \(object)")
            XCTAssertEqual(try rs.decode(Event.self), event)
        }
        XCTAssertEqual(rows, 2)
        db.setDateFormat(nil)
        XCTAssertEqual(db.double(forQuery: "SELECT at FROM events WHERE rowid = 1"), 1_000)
        XCTAssertEqual(db.string(forQuery: "SELECT at FROM events WHERE rowid = 2"), "1970-01-01 00:16:40")
    }
}
