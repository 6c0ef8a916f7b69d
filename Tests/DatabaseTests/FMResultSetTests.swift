import FMDB
import Foundation
import TestSupport
import XCTest

/// A port of FMDB's Tests/FMResultSetTests.m, plus the result-set rules of <doc:BindingAndReadingValues>.
final class FMResultSetTests: FMDBTempDBTestCase {
    override class func populateDatabase(_ db: FMDatabase) {
        db.executeUpdate("create table test (a text, b text, c integer, d double, e double)")
        db.beginTransaction()
        for i in 1...20 {
            db.executeUpdate(
                "insert into test (a, b, c, d, e) values (?, ?, ?, ?, ?)",
                "hi'", "number \(i)", NSNumber(value: i), Date(), NSNumber(value: Float(2.2)))
        }
        db.commit()
    }

    private func makeTestTable() {
        db.executeUpdate("CREATE TABLE testTable(key INTEGER PRIMARY KEY, value INTEGER)")
        db.executeUpdate("INSERT INTO testTable (key, value) VALUES (1, 2)")
        db.executeUpdate("INSERT INTO testTable (key, value) VALUES (2, 4)")
    }

    /// Column lookup by name: literal names (found by their representation), names built at run time,
    /// names longer than a String's inline storage, other spellings, duplicates (the last wins) and
    /// absent names.
    func testColumnLookupByNameForEveryKindOfName() throws {
        let long = "a_column_name_longer_than_fifteen_bytes"
        let rs = try XCTUnwrap(
            db.executeQuery("SELECT 1 AS id, 2 AS \(long), 3 AS Mixed, 4 AS dup, 5 AS dup, 6 AS \"caf\u{E9}\""))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.int(forColumn: "id"), 1)
        XCTAssertEqual(rs.int(forColumn: String(["i", "d"])), 1, "a name built at run time")
        XCTAssertEqual(rs.int(forColumn: long), 2)
        XCTAssertEqual(rs.int(forColumn: String(long.reversed().reversed())), 2, "a long name in other storage")
        XCTAssertEqual(rs.int(forColumn: "A_COLUMN_NAME_LONGER_THAN_FIFTEEN_BYTES"), 2)
        XCTAssertEqual(rs.int(forColumn: "Mixed"), 3)
        XCTAssertEqual(rs.int(forColumn: "mixed"), 3)
        XCTAssertEqual(rs.int(forColumn: "MIXED"), 3)
        XCTAssertEqual(rs.columnIndex(forName: "dup"), 4, "duplicate names: the last column wins, as in FMDB")
        XCTAssertEqual(rs.int(forColumn: "DUP"), 5)
        XCTAssertEqual(rs.int(forColumn: "caf\u{E9}"), 6, "a non-ASCII name")
        XCTAssertEqual(rs.int(forColumn: "cafe\u{301}"), 6, "the same name in another normalization")
        XCTAssertEqual(rs.columnIndex(forName: "absent"), -1)
        XCTAssertEqual(rs.columnIndex(forName: "i"), -1, "a prefix is not a match")
        XCTAssertEqual(rs.columnIndex(forName: ""), -1)
        rs.close()
    }

    func testNextWithError_WithoutError() throws {
        makeTestTable()
        let resultSet = try XCTUnwrap(db.executeQuery("SELECT * FROM testTable WHERE key=1"))
        XCTAssertTrue(try resultSet.nextWithError())
        XCTAssertFalse(try resultSet.nextWithError())
        resultSet.close()
    }

    func testNextWithError_WithBusyError() throws {
        makeTestTable()
        db.maxBusyRetryTimeInterval = 0.1
        let resultSet = try XCTUnwrap(db.executeQuery("SELECT * FROM testTable WHERE key=1"))
        let newDB = FMDatabase(path: databasePath)
        XCTAssertTrue(newDB.open())
        XCTAssertTrue(newDB.beginExclusiveTransaction())
        XCTAssertThrowsError(try resultSet.nextWithError()) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_BUSY), "SQLITE_BUSY should be the last error")
        }
        newDB.commit()
        newDB.close()
        resultSet.close()
    }

    func testNextWithError_WithMisuseError() throws {
        makeTestTable()
        let resultSet = try XCTUnwrap(db.executeQuery("SELECT * FROM testTable WHERE key=9"))
        XCTAssertFalse(resultSet.next())
        XCTAssertThrowsError(try resultSet.nextWithError()) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_MISUSE), "SQLITE_MISUSE should be the last error")
        }
    }

    func testColumnTypes() throws {
        db.executeUpdate("CREATE TABLE testTable (intValue INTEGER, floatValue FLOAT, textValue TEXT, blobValue BLOB)")
        let sql = "INSERT INTO testTable (intValue, floatValue, textValue, blobValue) VALUES (?, ?, ?, ?)"
        try db.executeUpdate(sql, values: [42, Double.pi, "test", Data("foo".utf8)])
        try db.executeUpdate(sql, values: [NSNull(), NSNull(), NSNull(), NSNull()])
        try db.executeUpdate(sql, values: [NSNull(), NSNull(), NSNull(), Data()])
        let resultSet = try XCTUnwrap(db.executeQuery("SELECT * FROM testTable"))
        XCTAssertTrue(resultSet.next())
        XCTAssertEqual(resultSet.type(forColumn: "intValue"), .integer)
        XCTAssertEqual(resultSet.type(forColumn: "floatValue"), .float)
        XCTAssertEqual(resultSet.type(forColumn: "textValue"), .text)
        XCTAssertEqual(resultSet.type(forColumn: "blobValue"), .blob)
        XCTAssertNotNil(resultSet.data(forColumn: "blobValue"))
        XCTAssertTrue(resultSet.next())
        for column in ["intValue", "floatValue", "textValue", "blobValue"] {
            XCTAssertEqual(resultSet.type(forColumn: column), .null)
        }
        XCTAssertNil(resultSet.data(forColumn: "blobValue"))
        XCTAssertTrue(resultSet.next())
        // An empty Data stays a zero-length BLOB (not NULL); FMDB reads it back as nil / NSNull.
        XCTAssertEqual(resultSet.type(forColumn: "blobValue"), .blob)
        XCTAssertNil(resultSet.data(forColumn: "blobValue"))
        XCTAssertNil(resultSet.dataNoCopy(forColumn: "blobValue"))
        XCTAssertTrue(resultSet.object(forColumn: "blobValue") is NSNull)
        XCTAssertTrue(resultSet.resultDictionary?["blobValue"] is NSNull)
        resultSet.close()
        XCTAssertEqual(db.int(forQuery: "select count(*) from testTable where blobValue = x''"), 1)
    }

    func testObjectSemantics() throws {
        let rs = try XCTUnwrap(db.executeQuery("select 42 as i, 1.5 as f, 'text' as t, x'0001' as b, NULL as n"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.object(forColumn: "i") as? NSNumber, NSNumber(value: Int64(42)))
        XCTAssertEqual(rs.object(forColumn: "f") as? NSNumber, NSNumber(value: 1.5))
        XCTAssertEqual(rs.object(forColumn: "t") as? String, "text")
        XCTAssertEqual(rs.object(forColumn: "b") as? Data, Data([0, 1]))
        XCTAssertTrue(rs.object(forColumn: "n") is NSNull)
        XCTAssertNil(rs.object(forColumn: "missing"))
        XCTAssertNil(rs.object(forColumnIndex: 99))
        XCTAssertNil(rs[Int32(-1)])
        XCTAssertEqual(rs["I"] as? NSNumber, NSNumber(value: 42), "column names are case-insensitive")
        let dictionary = try XCTUnwrap(rs.resultDictionary)
        XCTAssertEqual(dictionary.count, 5)
        XCTAssertTrue(dictionary["n"] is NSNull)
        XCTAssertEqual(dictionary["t"] as? String, "text")
        XCTAssertEqual(rs.columnCount, 5)
        XCTAssertEqual(rs.columnIndex(forName: "T"), 2)
        XCTAssertEqual(rs.columnIndex(forName: "nope"), -1)
        XCTAssertNil(rs.columnName(for: 5))
        XCTAssertEqual(rs.query, "select 42 as i, 1.5 as f, 'text' as t, x'0001' as b, NULL as n")
        XCTAssertTrue(rs.parentDB === db)
        XCTAssertTrue(rs.columnIsNull("n"))
        XCTAssertTrue(rs.columnIsNull("missing"))
        XCTAssertFalse(rs.columnIsNull("i"))
    }

    func testTypedGettersOnNullAndUnknownColumns() throws {
        let rs = try XCTUnwrap(db.executeQuery("select NULL as n"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.int(forColumn: "n"), 0)
        XCTAssertEqual(rs.long(forColumn: "n"), 0)
        XCTAssertEqual(rs.longLongInt(forColumn: "n"), 0)
        XCTAssertEqual(rs.unsignedLongLongInt(forColumn: "n"), 0)
        XCTAssertEqual(rs.double(forColumn: "n"), 0)
        XCTAssertFalse(rs.bool(forColumn: "n"))
        XCTAssertNil(rs.string(forColumn: "n"))
        XCTAssertNil(rs.date(forColumn: "n"))
        XCTAssertNil(rs.data(forColumn: "n"))
        XCTAssertNil(rs.utf8String(forColumn: "n"))
        XCTAssertEqual(rs.type(forColumn: "n"), .null)
        XCTAssertEqual(rs.int(forColumn: "zzz"), 0)
        XCTAssertNil(rs.string(forColumnIndex: 7))
        XCTAssertEqual(rs.type(forColumnIndex: -3), .null)
    }

    func testClosedResultSetIsHarmless() throws {
        let rs = try XCTUnwrap(db.executeQuery("select * from test"))
        XCTAssertTrue(rs.next())
        rs.close()
        XCTAssertFalse(rs.next())
        XCTAssertFalse(rs.hasAnotherRow())
        XCTAssertNil(rs.string(forColumnIndex: 0))
        XCTAssertNil(rs.resultDictionary)
        XCTAssertEqual(rs.columnCount, 0)
        XCTAssertFalse(rs.bind(withArray: [1]))
        XCTAssertThrowsError(try rs.nextWithError()) { XCTAssertEqual(nsError($0).code, Int(SQLITE_MISUSE)) }
        rs.close()
    }

    func testResultSetClosesWhenDatabaseCloses() throws {
        let rs = try XCTUnwrap(db.executeQuery("select * from test"))
        XCTAssertTrue(rs.next())
        db.close()
        XCTAssertNil(rs.parentDB)
        XCTAssertFalse(rs.next())
        XCTAssertNil(rs.string(forColumnIndex: 0))
    }

    func testResultSetClosesOnDeinit() {
        do {
            let rs = db.executeQuery("select * from test")
            XCTAssertTrue(rs?.next() ?? false)
            XCTAssertTrue(db.hasOpenResultSets)
        }
        XCTAssertFalse(db.hasOpenResultSets)
    }

    func testPrepareThenBind() throws {
        let rs = try XCTUnwrap(db.prepare("select c from test where c = ? or b = :name"))
        XCTAssertTrue(rs.bind(withArray: [3, "number 7"]))
        var found: [Int32] = []
        while rs.next() { found.append(rs.int(forColumnIndex: 0)) }
        XCTAssertEqual(found, [3, 7])
        let named = try XCTUnwrap(db.prepare("select c from test where c = :c"))
        XCTAssertTrue(named.bind(withDictionary: ["c": 5]))
        XCTAssertTrue(named.next())
        XCTAssertEqual(named.int(forColumnIndex: 0), 5)
        XCTAssertTrue(named.bind(withDictionary: ["c": 6]), "a prepared statement can be bound again")
        XCTAssertTrue(named.next())
        XCTAssertEqual(named.int(forColumnIndex: 0), 6)
        XCTAssertFalse(named.bind(withArray: [1, 2]), "wrong bind count")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_RANGE)
        named.close()
    }

    /// FMDB 2.7.8+: a result set from `prepare` survives the end of its rows; every bind resets it and
    /// binds again, until `close()`.
    func testPreparedResultSetIsReusableAfterItsLastRow() throws {
        let query = try XCTUnwrap(db.prepare("select c from test where c = ?"))
        for value in [3, 5, 999, 7] {
            XCTAssertTrue(query.bind(withArray: [value]), "bind \(value): \(db.lastErrorMessage())")
            var found: [Int32] = []
            while query.next() { found.append(query.int(forColumnIndex: 0)) }
            XCTAssertEqual(found, value == 999 ? [] : [Int32(value)])
            XCTAssertTrue(db.hasOpenResultSets, "still open after its last row")
        }
        XCTAssertFalse(query.bind(withArray: [1, 2]), "a wrong bind count still fails")
        let insert = try XCTUnwrap(db.prepare("insert into test (a, c) values (:a, :c)"))
        for i in 0..<5 {
            XCTAssertTrue(insert.bind(withDictionary: ["a": "reused", "c": 1000 + i]), db.lastErrorMessage())
            XCTAssertTrue(insert.step(), db.lastErrorMessage())
        }
        XCTAssertEqual(db.int(forQuery: "select count(*) from test where a = 'reused'"), 5)
        query.close()
        insert.close()
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(query.bind(withArray: [1]), "closed: no more binds")
    }

    /// A reusable set whose statement fails stays usable: the next bind runs it again.
    func testPreparedResultSetSurvivesAnError() throws {
        db.executeUpdate("create table u (x integer unique)")
        let insert = try XCTUnwrap(db.prepare("insert into u values (?)"))
        XCTAssertTrue(insert.bind(withArray: [1]))
        XCTAssertTrue(insert.step())
        XCTAssertTrue(insert.bind(withArray: [1]))
        XCTAssertFalse(insert.step(), "unique constraint")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_CONSTRAINT)
        XCTAssertTrue(insert.bind(withArray: [2]))
        XCTAssertTrue(insert.step())
        XCTAssertFalse(db.hadError(), "a success clears the last error")
        XCTAssertEqual(db.int(forQuery: "select count(*) from u"), 2)
    }

    /// Result sets from executeQuery still close themselves at the end, as FMDB's do.
    func testExecuteQueryResultSetClosesAtItsEnd() throws {
        let rs = try XCTUnwrap(db.executeQuery("select c from test where c = 1"))
        XCTAssertTrue(rs.next())
        XCTAssertFalse(rs.next())
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(rs.bind(withArray: [1]))
    }

    func testStepReportsCompletion() throws {
        let rs = try XCTUnwrap(db.prepare("insert into test (a) values (?)"))
        XCTAssertTrue(rs.bind(withArray: ["stepped"]))
        XCTAssertTrue(rs.step())
        XCTAssertEqual(db.int(forQuery: "select count(*) from test where a = 'stepped'"), 1)
    }

    func testStringsKeepEmbeddedNULsAndEmptiness() throws {
        db.executeUpdate("create table s (v text)")
        let withNUL = "a\u{0}b"
        XCTAssertTrue(db.executeUpdate("insert into s values (?)", withNUL))
        XCTAssertTrue(db.executeUpdate("insert into s values (?)", ""))
        XCTAssertEqual(db.int(forQuery: "select length(cast(v as blob)) from s where rowid = 1"), 3)
        XCTAssertEqual(db.string(forQuery: "select v from s where rowid = 1"), withNUL)
        XCTAssertEqual(db.string(forQuery: "select v from s where rowid = 2"), "")
        XCTAssertEqual(db.string(forQuery: "select typeof(v) from s where rowid = 2"), "text")
    }

    func testInvalidUTF8IsRepairedNotCrashed() throws {
        db.executeUpdate("create table s (v)")
        db.executeUpdate("insert into s values (cast(x'61ff62' as text))")
        XCTAssertEqual(db.string(forQuery: "select v from s"), "a\u{FFFD}b")
    }

    func testHasAnotherRow() throws {
        let rs = try XCTUnwrap(db.executeQuery("select c from test where c <= 2 order by c"))
        XCTAssertFalse(rs.hasAnotherRow())
        XCTAssertTrue(rs.next())
        XCTAssertTrue(rs.hasAnotherRow())
        XCTAssertTrue(rs.next())
        XCTAssertFalse(rs.next())
        XCTAssertFalse(rs.hasAnotherRow())
    }

    // MARK: - The per-value and per-query fast paths

    /// Text and BLOB values read through the getters that skip the separate type check: NULL, empty,
    /// short and long (past a String's 15 inline bytes), embedded NULs, invalid UTF-8 (repaired with
    /// U+FFFD, as `String(decoding:as:)` does), and values of one class read as another.
    func testTextAndBlobGettersAcrossSizesAndInvalidUTF8() throws {
        db.executeUpdate("create table v (id integer primary key, t, b)")
        let long = String(repeating: "0123456789", count: 30) + "\u{0}tail"
        let rows: [(Int, String)] = [
            (1, "NULL, NULL"), (2, "'', x''"), (3, "'short', x'00ff'"),
            (4, "cast(x'61ff62' as text), x'61ff62'"),
            (5, "cast(x'41414141414141414141414141414141414141e282' as text), zeroblob(0)"),
            (6, "42, 4.5"),
        ]
        for (id, values) in rows {
            XCTAssertTrue(db.executeUpdate("insert into v values (\(id), \(values))"), db.lastErrorMessage())
        }
        XCTAssertTrue(db.executeUpdate("insert into v values (7, ?, ?)", long, Data(repeating: 0xA5, count: 1 << 20)))
        let rs = try XCTUnwrap(db.executeQuery("select t, b from v order by id"))
        var texts: [String?] = []
        var blobs: [Data?] = []
        var utf8: [[UInt8]?] = []
        while rs.next() {
            texts.append(rs.string(forColumnIndex: 0))
            blobs.append(rs.data(forColumn: "b"))
            utf8.append(rs.utf8String(forColumnIndex: 0).map { Array(UnsafeBufferPointer(start: $0, count: 3)) })
        }
        XCTAssertEqual(texts.count, 7)
        XCTAssertNil(texts[0])
        XCTAssertEqual(texts[1], "")
        XCTAssertEqual(texts[2], "short")
        XCTAssertEqual(texts[3], "a\u{FFFD}b")
        XCTAssertEqual(texts[4], String(repeating: "A", count: 19) + "\u{FFFD}", "a cut multi-byte sequence at the end")
        XCTAssertEqual(texts[5], "42")
        XCTAssertEqual(texts[6], long, "a long string with an embedded NUL")
        XCTAssertNil(blobs[0])
        XCTAssertNil(blobs[1], "a zero-length BLOB is nil, as FMDB")
        XCTAssertEqual(blobs[2], Data([0x00, 0xFF]))
        XCTAssertEqual(blobs[3], Data([0x61, 0xFF, 0x62]), "BLOB bytes are never repaired")
        XCTAssertNil(blobs[4], "zeroblob(0)")
        XCTAssertEqual(blobs[5], Data("4.5".utf8), "a REAL read as bytes: SQLite's text form")
        XCTAssertEqual(blobs[6]?.count, 1 << 20)
        XCTAssertEqual(blobs[6]?.allSatisfy { $0 == 0xA5 }, true)
        XCTAssertNil(utf8[0])
        XCTAssertEqual(utf8[2], Array("sho".utf8))
    }

    /// Every `Data` is its own copy: valid after the row moves on and after the set closes, and
    /// changing one changes no other.
    func testEveryBlobIsAnIndependentCopy() throws {
        db.executeUpdate("create table b (v blob)")
        for byte in [UInt8(1), 2] { db.executeUpdate("insert into b values (?)", Data(repeating: byte, count: 64)) }
        let rs = try XCTUnwrap(db.executeQuery("select v from b order by rowid"))
        XCTAssertTrue(rs.next())
        var first = try XCTUnwrap(rs.data(forColumnIndex: 0))
        let again = try XCTUnwrap(rs.data(forColumn: "v"))
        XCTAssertTrue(rs.next())
        let second = try XCTUnwrap(rs.data(forColumnIndex: 0))
        rs.close()
        first[0] = 0xEE
        XCTAssertEqual(again, Data(repeating: 1, count: 64), "a second read of the same value is another copy")
        XCTAssertEqual(second, Data(repeating: 2, count: 64))
        XCTAssertEqual(first.count, 64)
        XCTAssertEqual(first.startIndex, 0, "a whole Data, not a slice of shared storage")
    }

    /// Many open sets, closed in every order: by hand (first, last, middle), by deinit, by
    /// `closeOpenResultSets`, and by `close()` of the database; prepared (reusable) sets included.
    func testManyOpenResultSetsCloseInAnyOrder() throws {
        var sets: [FMResultSet] = []
        for i in 0..<60 {
            let rs = try XCTUnwrap(
                i % 3 == 0 ? db.prepare("select c from test where c > ?") : db.executeQuery("select c from test"))
            if i % 3 == 0 { XCTAssertTrue(rs.bind(withArray: [i % 20])) }
            XCTAssertTrue(rs.next())
            sets.append(rs)
        }
        sets[0].close()
        sets[59].close()
        sets[30].close()
        do { _ = sets.remove(at: 45) }  // the last reference: its deinit closes and unlinks it
        XCTAssertTrue(db.hasOpenResultSets)
        XCTAssertTrue(sets[10].next(), "closing others leaves this one open")
        db.closeOpenResultSets()
        XCTAssertFalse(db.hasOpenResultSets)
        for rs in sets {
            XCTAssertFalse(rs.next())
            XCTAssertNil(rs.parentDB)
        }
        XCTAssertEqual(db.int(forQuery: "select count(*) from test"), 20, "the database still works")
        let left = [try XCTUnwrap(db.executeQuery("select 1")), try XCTUnwrap(db.prepare("select 2"))]
        XCTAssertTrue(db.hasOpenResultSets)
        XCTAssertTrue(db.close())
        XCTAssertTrue(left.allSatisfy { $0.parentDB == nil && !$0.next() })
    }

    /// A prepared set looked up by name keeps answering across binds; a closed one answers -1.
    func testReusedPreparedSetLooksUpNamesAcrossBinds() throws {
        let rs = try XCTUnwrap(db.prepare("select c as value, b as Label from test where c = ?"))
        for i in [4, 9, 4] {
            XCTAssertTrue(rs.bind(withArray: [i]))
            XCTAssertTrue(rs.next())
            XCTAssertEqual(rs.int(forColumn: "value"), Int32(i))
            XCTAssertEqual(rs.string(forColumn: "label"), "number \(i)")
            XCTAssertEqual(rs.string(forColumn: "Label"), "number \(i)")
            XCTAssertFalse(rs.next())
        }
        rs.close()
        XCTAssertEqual(rs.columnIndex(forName: "value"), -1)
        XCTAssertEqual(rs.int(forColumn: "value"), 0)
    }
}
