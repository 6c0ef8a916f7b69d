import FMDB
import Foundation
import TestSupport
import XCTest

/// Rows into Decodable values (`FMResultSet.decode`, `fetchAll`, `fetchOne`) and Encodable values into
/// named parameters (`executeUpdate(_:encoding:)`).
final class CodableRowTests: FMDBTempDBTestCase {
    enum Mood: String, Codable { case calm, busy }
    enum Level: Int, Codable { case low = 1, high = 9 }
    struct Address: Codable, Equatable { var street: String; var zip: Int }

    struct Person: Codable, Equatable {
        var id: Int64
        var name: String
        var email: String?
        var score: Double
        var active: Bool
        var avatar: Data?
        var born: Date
        var mood: Mood
        var level: Level
        var address: Address
        var tags: [String]
        var tiny: Int8
        var big: UInt64
        var ratio: Float
        var homepage: URL?
        var token: UUID
    }

    private func createPeople() throws {
        try db.executeUpdate(
            """
            CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT, score REAL, active INTEGER,
              avatar BLOB, born, mood TEXT, level INTEGER, address TEXT, tags TEXT, tiny INTEGER, big INTEGER,
              ratio REAL, homepage TEXT, token TEXT)
            """, values: nil)
    }

    private func sample(id: Int64 = 1) -> Person {
        Person(
            id: id, name: "Ada", email: nil, score: 2.5, active: true, avatar: Data([0, 1, 2]),
            born: Date(timeIntervalSince1970: 1_000_000), mood: .busy, level: .high,
            address: Address(street: "Main", zip: 12345), tags: ["a", "b"], tiny: -7, big: 42, ratio: 0.5,
            homepage: URL(string: "https://example.com/a"), token: UUID())
    }

    private func insert(_ person: Person) throws {
        try db.executeUpdate(
            """
            INSERT INTO people VALUES (:id, :name, :email, :score, :active, :avatar, :born, :mood, :level,
              :address, :tags, :tiny, :big, :ratio, :homepage, :token)
            """, encoding: person)
    }

    private func assertMismatch(
        _ body: () throws -> Void, mentions words: [String],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            let ns = error as NSError
            XCTAssertEqual(ns.domain, "FMDatabase", file: file, line: line)
            XCTAssertEqual(ns.code, Int(SQLITE_MISMATCH), file: file, line: line)
            for word in words {
                XCTAssertTrue(
                    ns.localizedDescription.contains(word), "\(ns.localizedDescription) lacks \(word)",
                    file: file, line: line)
            }
        }
    }

    func testCodableRoundTripThroughInsertAndFetch() throws {
        try createPeople()
        let people = [sample(id: 1), sample(id: 2)]
        for person in people { try insert(person) }
        XCTAssertEqual(try db.fetchAll(Person.self, "SELECT * FROM people ORDER BY id"), people)
        XCTAssertEqual(try db.fetchOne(Person.self, "SELECT * FROM people WHERE id = ?", values: [2]), people[1])
        XCTAssertNil(try db.fetchOne(Person.self, "SELECT * FROM people WHERE id = ?", values: [3]))
        // The stored forms: JSON text for nested values, raw values for enums, 0/1, BLOB, seconds.
        XCTAssertEqual(
            db.string(forQuery: "SELECT address FROM people WHERE id = 1"),
            #"{"street":"Main","zip":12345}"#, "nested values are JSON with sorted keys")
        XCTAssertEqual(db.string(forQuery: "SELECT mood FROM people WHERE id = 1"), "busy")
        XCTAssertEqual(db.int(forQuery: "SELECT level FROM people WHERE id = 1"), 9)
        XCTAssertEqual(
            db.string(forQuery: "SELECT typeof(avatar) || typeof(email) || typeof(born) FROM people"),
            "blobnullreal")
    }

    func testCodableDecodeReadsEachRowByColumnName() throws {
        try createPeople()
        let person = sample(id: 1)
        try insert(person)
        let rs = try db.executeQuery("SELECT token, name, id, 'x' AS extra FROM people", values: nil)
        struct Few: Decodable { var ID: Int; var NAME: String }  // names match case-insensitively
        XCTAssertTrue(rs.next())
        let few = try rs.decode(Few.self)
        XCTAssertEqual(few.ID, 1)
        XCTAssertEqual(few.NAME, "Ada")
        XCTAssertEqual(try rs.decode(UUID.self), person.token)  // a single value: the first column
    }

    func testCodableSingleValueTypesReadTheFirstColumn() throws {
        XCTAssertEqual(try db.fetchOne(Int.self, "SELECT 7"), 7)
        XCTAssertEqual(try db.fetchAll(String.self, "SELECT 'a' UNION ALL SELECT 'b'"), ["a", "b"])
        XCTAssertEqual(try db.fetchOne(Mood.self, "SELECT 'calm'"), .calm)
        XCTAssertEqual(try db.fetchOne(Date.self, "SELECT 86400"), Date(timeIntervalSince1970: 86400))
        XCTAssertEqual(try db.fetchOne(Data.self, "SELECT x'0102'"), Data([1, 2]))
        XCTAssertEqual(try db.fetchOne(Data.self, "SELECT zeroblob(0)"), Data())
        XCTAssertEqual(try db.fetchOne(Int?.self, "SELECT NULL"), .some(nil))
    }

    func testCodableEveryIntegerWidthWithRangeChecks() throws {
        struct Widths: Decodable, Equatable {
            var i: Int; var i8: Int8; var i16: Int16; var i32: Int32; var i64: Int64
            var u: UInt; var u8: UInt8; var u16: UInt16; var u32: UInt32; var u64: UInt64
        }
        let widths = try db.fetchOne(
            Widths.self,
            """
            SELECT -1 AS i, -128 AS i8, -32768 AS i16, -2147483648 AS i32, -9223372036854775808 AS i64,
                   1 AS u, 255 AS u8, 65535 AS u16, 4294967295 AS u32, 9223372036854775807 AS u64
            """)
        XCTAssertEqual(
            widths,
            Widths(
                i: -1, i8: .min, i16: .min, i32: .min, i64: .min,
                u: 1, u8: .max, u16: .max, u32: .max, u64: UInt64(Int64.max)))
        struct Small: Decodable { var v: Int8 }
        struct Unsigned: Decodable { var v: UInt32 }
        assertMismatch({ _ = try db.fetchOne(Small.self, "SELECT 128 AS v") }, mentions: ["'v'", "Int8", "range"])
        assertMismatch({ _ = try db.fetchOne(Unsigned.self, "SELECT -1 AS v") }, mentions: ["'v'", "UInt32", "range"])
        assertMismatch({ _ = try db.fetchOne(Small.self, "SELECT 1.5 AS v") }, mentions: ["'v'", "Int8", "REAL"])
        XCTAssertEqual(try db.fetchOne(Small.self, "SELECT 3.0 AS v")?.v, 3)
    }

    /// `Int` and `Int64`, plain and optional, convert as every other width: an integral REAL is read, a
    /// fractional REAL, TEXT or (for a plain property) NULL is an error naming the column and the type.
    func testCodableIntAndInt64ConvertAsTheOtherWidths() throws {
        struct Plain: Decodable, Equatable { var i: Int; var i64: Int64 }
        struct Maybe: Decodable, Equatable { var i: Int?; var i64: Int64? }
        XCTAssertEqual(try db.fetchOne(Plain.self, "SELECT 3.0 AS i, -4.0 AS i64"), Plain(i: 3, i64: -4))
        XCTAssertEqual(try db.fetchOne(Maybe.self, "SELECT 3.0 AS i, -4.0 AS i64"), Maybe(i: 3, i64: -4))
        XCTAssertEqual(try db.fetchOne(Maybe.self, "SELECT NULL AS i"), Maybe(i: nil, i64: nil))
        for (sql, found) in [("1.5", "REAL"), ("'7'", "TEXT"), ("NULL", "NULL")] {
            assertMismatch(
                { _ = try db.fetchOne(Plain.self, "SELECT \(sql) AS i, 1 AS i64") }, mentions: ["'i'", "Int", found])
            assertMismatch(
                { _ = try db.fetchOne(Plain.self, "SELECT 1 AS i, \(sql) AS i64") },
                mentions: ["'i64'", "Int64", found])
            if found != "NULL" {
                assertMismatch(
                    { _ = try db.fetchOne(Maybe.self, "SELECT \(sql) AS i64") }, mentions: ["'i64'", "Int64", found])
            }
        }
    }

    func testCodableNullIntoNonOptionalNamesTheColumn() throws {
        struct Named: Decodable { var name: String }
        assertMismatch(
            { _ = try db.fetchOne(Named.self, "SELECT NULL AS name") },
            mentions: ["'name'", "String", "NULL"])
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISMATCH)
    }

    func testCodableMissingColumnIsAnErrorUnlessOptional() throws {
        struct Named: Decodable { var name: String }
        struct Maybe: Decodable { var name: String? }
        assertMismatch({ _ = try db.fetchOne(Named.self, "SELECT 1 AS other") }, mentions: ["'name'", "Named"])
        XCTAssertNil(try db.fetchOne(Maybe.self, "SELECT 1 AS other")?.name)
    }

    func testCodableTypeMismatchNamesColumnAndType() throws {
        struct Flag: Decodable { var flag: Bool }
        struct Text: Decodable { var t: String }
        assertMismatch(
            { _ = try db.fetchOne(Flag.self, "SELECT 'yes' AS flag") }, mentions: ["'flag'", "Bool", "TEXT"])
        assertMismatch({ _ = try db.fetchOne(Text.self, "SELECT 5 AS t") }, mentions: ["'t'", "String", "INTEGER"])
        XCTAssertEqual(try db.fetchOne(Flag.self, "SELECT 0 AS flag")?.flag, false)
        XCTAssertEqual(try db.fetchOne(Flag.self, "SELECT 2 AS flag")?.flag, true)
    }

    func testCodableEnumRawValues() throws {
        struct Row: Decodable { var mood: Mood; var level: Level }
        let row = try db.fetchOne(Row.self, "SELECT 'calm' AS mood, 1 AS level")
        XCTAssertEqual(row?.mood, .calm)
        XCTAssertEqual(row?.level, .low)
        assertMismatch(
            { _ = try db.fetchOne(Row.self, "SELECT 'sad' AS mood, 1 AS level") }, mentions: ["'mood'", "Mood"])
    }

    func testCodableNestedJSON() throws {
        struct Row: Decodable { var address: Address; var tags: [String]; var extra: [String: Int]? }
        let row = try db.fetchOne(
            Row.self, #"SELECT '{"street":"Elm","zip":1}' AS address, '["x"]' AS tags, NULL AS extra"#)
        XCTAssertEqual(row?.address, Address(street: "Elm", zip: 1))
        XCTAssertEqual(row?.tags, ["x"])
        assertMismatch(
            { _ = try db.fetchOne(Row.self, "SELECT 'not json' AS address, '[]' AS tags") },
            mentions: ["'address'", "Address", "JSON"])
    }

    func testCodableDatesWithoutDateFormatAreSecondsSince1970() throws {
        struct Row: Decodable { var when: Date }
        XCTAssertEqual(try db.fetchOne(Row.self, "SELECT 1.5 AS \"when\"")?.when, Date(timeIntervalSince1970: 1.5))
        assertMismatch(
            { _ = try db.fetchOne(Row.self, "SELECT '2020-01-01' AS \"when\"") }, mentions: ["'when'", "date format"])
    }

    func testCodableDatesWithDateFormatUseIt() throws {
        struct Row: Codable, Equatable { var when: Date }
        db.setDateFormat(FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss"))
        try db.executeUpdate("CREATE TABLE t (\"when\")", values: nil)
        let row = Row(when: Date(timeIntervalSince1970: 1_600_000_000))
        try db.executeUpdate("INSERT INTO t VALUES (:when)", encoding: row)
        XCTAssertEqual(db.string(forQuery: "SELECT \"when\" FROM t"), "2020-09-13 12:26:40")
        XCTAssertEqual(try db.fetchOne(Row.self, "SELECT * FROM t"), row)
        assertMismatch(
            { _ = try db.fetchOne(Row.self, "SELECT 'soon' AS \"when\"") }, mentions: ["'when'", "date format"])
    }

    func testCodableDecodeWithoutCurrentRowIsMisuse() throws {
        let rs = try db.executeQuery("SELECT 1 AS v", values: nil)
        XCTAssertThrowsError(try rs.decode(Int.self)) { XCTAssertEqual(($0 as NSError).code, Int(SQLITE_MISUSE)) }
        rs.close()
    }

    func testCodableEncodingRefusesUnsignedBeyondInt64AndMissingParameters() throws {
        struct Big: Encodable { var v: UInt64 }
        struct Short: Encodable { var a: Int }
        try db.executeUpdate("CREATE TABLE t (a, v)", values: nil)
        assertMismatch(
            { try db.executeUpdate("INSERT INTO t (v) VALUES (:v)", encoding: Big(v: .max)) },
            mentions: ["'v'", "64-bit"])
        XCTAssertThrowsError(try db.executeUpdate("INSERT INTO t VALUES (:a, :v)", encoding: Short(a: 1))) {
            XCTAssertEqual(($0 as NSError).code, Int(SQLITE_RANGE))
        }
    }
}

/// The labelled and string-keyed spellings added beside FMDB's.
final class ErgonomicsTests: FMDBTempDBTestCase {
    func testErgonomicsKeySlotsListHasALabelledForm() throws {
        let path = directory.path("slots.db")
        _ = try KeySlots.createDatabase(
            at: path, secret: .passphrase("pw"), kdf: .unsafePBKDF2SHA512(iterations: 1_000))
        let slots = try KeySlots.list(forDatabaseAt: path)
        XCTAssertEqual(slots.map(\.id), [1])
        XCTAssertEqual(slots.map(\.kind), [.passphrase])
    }

    func testErgonomicsResultDictionaryWithStringKeys() throws {
        let rs = try db.executeQuery("SELECT 1 AS a, NULL AS b, 'x' AS c", values: nil)
        XCTAssertNil(rs.resultDictionaryWithStringKeys)  // no current row yet, as resultDictionary
        XCTAssertTrue(rs.next())
        let row: [String: Any] = try XCTUnwrap(rs.resultDictionaryWithStringKeys)
        XCTAssertEqual(row.keys.sorted(), ["a", "b", "c"])
        XCTAssertEqual(row["a"] as? NSNumber, 1)
        XCTAssertTrue(row["b"] is NSNull)
        XCTAssertEqual(row["c"] as? String, "x")
        XCTAssertEqual(rs.resultDictionary?.count, 3)  // FMDB's spelling is unchanged
        rs.close()
    }
}

/// The examples of FMDB.docc/CodableRows.md, the README's Codable example and GettingStarted's "File
/// permissions", compiled and run as written (keep them in step).
final class CodableDocumentationExamplesTests: FMDBTempDBTestCase {
    // FMDB.docc/CodableRows.md
    func testCodableArticleExamples() throws {
        struct Person: Codable, Equatable {
            var id: Int64
            var name: String
            var email: String?
            var joined: Date
        }
        try db.executeUpdate("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT, joined)", values: nil)
        let ada = Person(id: 1, name: "Ada", email: nil, joined: Date(timeIntervalSince1970: 0))
        try db.executeUpdate(
            "INSERT INTO people (id, name, email, joined) VALUES (:id, :name, :email, :joined)",
            encoding: ada)
        let everyone = try db.fetchAll(Person.self, "SELECT * FROM people ORDER BY id")
        let first = try db.fetchOne(Person.self, "SELECT * FROM people WHERE id = ?", values: [1])
        let count = try db.fetchOne(Int.self, "SELECT count(*) FROM people")  // a single value: the first column
        XCTAssertEqual(everyone, [ada])
        XCTAssertEqual(first, ada)
        XCTAssertEqual(count, 1)

        struct Named: Decodable { var name: String }
        var printed = false
        do {
            _ = try db.fetchOne(Named.self, "SELECT NULL AS name")
        } catch let error as FMDatabaseError {
            print(error.resultCode, error.message)  // 20 Cannot decode column 'name' as String: it is NULL ...
            printed = error.resultCode == SQLITE_MISMATCH
        }
        XCTAssertTrue(printed)
    }

    // README: Codable rows
    func testReadmeCodableExample() throws {
        db.executeUpdate("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)")
        struct Person: Codable { var id: Int64; var name: String; var age: Int? }
        try db.executeUpdate(
            "INSERT INTO people (id, name, age) VALUES (:id, :name, :age)",
            encoding: Person(id: 10, name: "Barbara", age: nil))
        let people = try db.fetchAll(Person.self, "SELECT id, name, age FROM people WHERE id = ?", values: [10])
        XCTAssertEqual(people.map(\.name), ["Barbara"])
        XCTAssertNil(people.first?.age)
    }

    // FMDB.docc/GettingStarted.md, "File permissions" (pasted as written: no unused-result warning)
    func testGettingStartedFilePermissions() throws {
        let path = directory.path("private.sqlite")
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            else {
                throw CocoaError(.fileWriteNoPermission)
            }
        }
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
    }
}

/// Which `inDatabase` overload a block gets (ComingFromFMDB, "Additions"): pinned at compile time by
/// the declared types, and at run time by the results.
final class ErgonomicsOverloadTests: XCTestCase {
    func testErgonomicsInDatabaseOverloadFollowsTheBlock() throws {
        let queue = FMDatabaseQueue()
        queue.inDatabase { db in db.executeUpdate("CREATE TABLE t (v)") }  // FMDB's Void form, no try
        let optional: Int32? = queue.inDatabase { $0.int(forQuery: "SELECT 7") }  // non-throwing block: T?
        let thrown: Int32 = try queue.inDatabase { db throws -> Int32 in db.int(forQuery: "SELECT 8") }
        let rows = try queue.inDatabase { db in try db.fetchAll(Int.self, "SELECT 9") }  // throwing block
        XCTAssertEqual(optional, 7)
        XCTAssertEqual(thrown, 8)
        XCTAssertEqual(rows, [9])
        queue.close()
    }
}
