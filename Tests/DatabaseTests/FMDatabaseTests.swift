import FMDB
import Foundation
import TestSupport
import XCTest

/// A port of FMDB's Tests/FMDatabaseTests.m, behaviour by behaviour.
final class FMDatabaseTests: FMDBTempDBTestCase {
    override class func populateDatabase(_ db: FMDatabase) {
        db.executeUpdate("create table test (a text, b text, c integer, d double, e double)")
        db.beginTransaction()
        for i in 1...20 {
            db.executeUpdate(
                "insert into test (a, b, c, d, e) values (?, ?, ?, ?, ?)",
                "hi'", "number \(i)", NSNumber(value: i), Date(), NSNumber(value: Float(2.2)))
        }
        db.commit()
        db.beginTransaction()
        for i in 1...20 {
            db.executeUpdate(
                "insert into test (a, b, c, d, e) values (?, ?, ?, ?, ?)",
                "hi again'", "number \(i)", NSNumber(value: i), Date(), NSNumber(value: Float(2.2)))
        }
        db.commit()
        db.executeUpdate("create table t3 (a somevalue)")
        db.beginTransaction()
        for i in 0..<20 {
            db.executeUpdate("insert into t3 (a) values (?)", i)
        }
        db.commit()
    }

    func testOpenWithVFS() throws {
        guard var vfs = sqlite3_vfs_find(nil)?.pointee else { return XCTFail("no default VFS") }
        let name = strdup("MyCustomVFS")
        vfs.zName = UnsafePointer(name)
        let registered = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        registered.initialize(to: vfs)
        XCTAssertEqual(SQLITE_OK, sqlite3_vfs_register(registered, 0))
        defer {
            sqlite3_vfs_unregister(registered)
            registered.deallocate()
            free(name)
        }
        let db = FMDatabase(path: ":memory:")
        db.open(withFlags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: "MyCustomVFS")
        XCTAssertFalse(db.hadError(), "Open with a custom VFS should have succeeded")
        db.close()
    }

    func testFailOnOpenWithUnknownVFS() {
        let db = FMDatabase(path: ":memory:")
        db.open(withFlags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: "UnknownVFS")
        XCTAssertTrue(db.hadError(), "Should have failed")
        XCTAssertFalse(db.isOpen)
    }

    func testFailOnUnopenedDatabase() {
        db.close()
        XCTAssertNil(db.executeQuery("select * from table"), "Shouldn't get results from an empty table")
        XCTAssertTrue(db.hadError(), "Should have failed")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
    }

    func testFailOnBadStatement() {
        XCTAssertFalse(db.executeUpdate("blah blah blah"), "Invalid statement should fail")
        XCTAssertTrue(db.hadError(), "Should have failed")
    }

    func testFailOnBadStatementWithError() {
        XCTAssertThrowsError(try db.executeUpdate("blah blah blah", values: nil)) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_ERROR), "Error should be SQLITE_ERROR")
            XCTAssertEqual(nsError(error).domain, "FMDatabase")
        }
    }

    func testPragmaJournalMode() {
        let ps = db.executeQuery("pragma journal_mode=delete")
        XCTAssertFalse(db.hadError(), "pragma should have succeeded")
        XCTAssertNotNil(ps, "Result set should be non-nil")
        XCTAssertTrue(ps?.next() ?? false, "Result set should have a next result")
        ps?.close()
    }

    func testPragmaPageSize() {
        db.executeUpdate("PRAGMA page_size=2048")
        XCTAssertFalse(db.hadError(), "pragma should have succeeded")
    }

    func testVacuum() {
        db.executeUpdate("VACUUM")
        XCTAssertFalse(db.hadError(), "VACUUM should have succeeded")
    }

    func testSelectULL() throws {
        db.executeUpdate("create table ull (a integer)")
        db.executeUpdate("insert into ull (a) values (?)", NSNumber(value: UInt64.max))
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
        db.executeUpdate("insert into ull (a) values (?)", UInt64.max)
        let rs = try XCTUnwrap(db.executeQuery("select a from ull"))
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertEqual(rs.unsignedLongLongInt(forColumnIndex: 0), UInt64.max, "Result should be ULLONG_MAX")
            XCTAssertEqual(rs.unsignedLongLongInt(forColumn: "a"), UInt64.max, "Result should be ULLONG_MAX")
        }
        XCTAssertEqual(rows, 2)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
    }

    func testSelectByColumnName() throws {
        let rs = try XCTUnwrap(db.executeQuery("select rowid,* from test where a = ?", "hi'"))
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertEqual(rs.int(forColumn: "c"), Int32(rows))
            XCTAssertNotNil(rs.string(forColumn: "b"), "Should have non-nil string for 'b'")
            XCTAssertNotNil(rs.string(forColumn: "a"), "Should have non-nil string for 'a'")
            XCTAssertNotNil(rs.string(forColumn: "rowid"), "Should have non-nil string for 'rowid'")
            XCTAssertNotNil(rs.date(forColumn: "d"), "Should have non-nil date for 'd'")
            XCTAssertEqual(rs.double(forColumn: "e"), Double(Float(2.2)), accuracy: 1e-9)
            XCTAssertEqual(rs.columnName(for: 0), "rowid", "Wrong column name for result set column number")
            XCTAssertEqual(rs.columnName(for: 1), "a", "Wrong column name for result set column number")
        }
        XCTAssertEqual(rows, 20)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
    }

    func testSelectWithIndexedAndKeyedSubscript() throws {
        let rs = try XCTUnwrap(db.executeQuery("select rowid, a, b, c from test"))
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertEqual(rs[0] as? NSNumber, rs["rowid"] as? NSNumber, "Column zero should be equal to 'rowid'")
            XCTAssertEqual(rs[1] as? String, rs["a"] as? String, "Column 1 should be equal to 'a'")
            XCTAssertEqual(rs[2] as? String, rs["b"] as? String, "Column 2 should be equal to 'b'")
            XCTAssertEqual(rs[3] as? NSNumber, rs["c"] as? NSNumber, "Column 3 should be equal to 'c'")
            XCTAssertNotNil(rs[1] as? String)
        }
        XCTAssertEqual(rows, 40)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
    }

    func testBusyRetryTimeout() throws {
        db.executeUpdate("create table t1 (a integer)")
        db.executeUpdate("insert into t1 values (?)", NSNumber(value: 5))
        db.maxBusyRetryTimeInterval = 0.2
        let newDB = FMDatabase(path: databasePath)
        XCTAssertTrue(newDB.open())
        let rs = newDB.executeQuery("select rowid,* from test where a = ?", "hi'")
        XCTAssertTrue(rs?.next() ?? false)  // just grab one... which will keep the db locked
        XCTAssertFalse(
            db.executeUpdate("insert into t1 values (5)"), "Insert should fail because the db is locked by a read")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_BUSY, "SQLITE_BUSY should be the last error")
        rs?.close()
        newDB.close()
        XCTAssertTrue(db.executeUpdate("insert into t1 values (5)"), "The database shouldn't be locked at this point")
    }

    func testCaseSensitiveResultDictionary() throws {
        db.executeUpdate("create table cs (aRowName integer, bRowName text)")
        db.executeUpdate("insert into cs (aRowName, bRowName) values (?, ?)", NSNumber(value: true), "hello")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
        let rs = try XCTUnwrap(db.executeQuery("select * from cs"))
        var rows = 0
        while rs.next() {
            rows += 1
            let d = try XCTUnwrap(rs.resultDictionary)
            XCTAssertNotNil(d["aRowName"], "aRowName should be non-nil")
            XCTAssertNil(d["arowname"], "arowname should be nil")
            XCTAssertNotNil(d["bRowName"], "bRowName should be non-nil")
            XCTAssertNil(d["browname"], "browname should be nil")
        }
        XCTAssertEqual(rows, 1)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
    }

    func testBoolInsert() throws {
        db.executeUpdate("create table btest (aRowName integer)")
        db.executeUpdate("insert into btest (aRowName) values (?)", NSNumber(value: true))
        db.executeUpdate("insert into btest (aRowName) values (?)", true)
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
        let rs = try XCTUnwrap(db.executeQuery("select * from btest"))
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertTrue(rs.bool(forColumnIndex: 0), "first column should be true.")
            XCTAssertEqual(rs.int(forColumnIndex: 0), 1)
        }
        XCTAssertEqual(rows, 2)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
    }

    func testNamedParametersCount() throws {
        XCTAssertTrue(db.executeUpdate("create table namedparamcounttest (a text, b text, c integer, d double)"))
        var dictionaryArgs: [AnyHashable: Any] = [
            "a": "Text1", "b": "Text2", "c": NSNumber(value: 1), "d": NSNumber(value: 2.0),
        ]
        XCTAssertTrue(
            db.executeUpdate(
                "insert into namedparamcounttest values (:a, :b, :c, :d)", withParameterDictionary: dictionaryArgs))
        var rs = try XCTUnwrap(db.executeQuery("select * from namedparamcounttest"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "Text1")
        XCTAssertEqual(rs.string(forColumn: "b"), "Text2")
        XCTAssertEqual(rs.int(forColumn: "c"), 1)
        XCTAssertEqual(rs.double(forColumn: "d"), 2.0)
        rs.close()
        // dictionaryArgs has more values than needed; the query still works since a is in there.
        rs = try XCTUnwrap(
            db.executeQuery("select * from namedparamcounttest where a = :a", withParameterDictionary: dictionaryArgs))
        XCTAssertTrue(rs.next())
        rs.close()
        dictionaryArgs = ["a": "NewText1", "b": "NewText2", "OneMore": "OneMoreText"]
        XCTAssertTrue(
            db.executeUpdate(
                "update namedparamcounttest set a = :a, b = :b where b = 'Text2'",
                withParameterDictionary: dictionaryArgs))
        XCTAssertEqual(db.string(forQuery: "select a from namedparamcounttest"), "NewText1")
    }

    func testNamedParametersMissingValueIsAnError() {
        XCTAssertTrue(db.executeUpdate("create table np (a text, b text)"))
        XCTAssertFalse(db.executeUpdate("insert into np values (:a, :b)", withParameterDictionary: ["a": "x"]))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_RANGE)
        XCTAssertEqual(db.int(forQuery: "select count(*) from np"), 0)
    }

    func testBlobs() throws {
        db.executeUpdate("create table blobTable (a text, b blob)")
        var generator = SystemRandomNumberGenerator()
        let blob = Data((0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        XCTAssertTrue(db.executeUpdate("insert into blobTable (a, b) values (?, ?)", "random blob", blob))
        let rs = try XCTUnwrap(db.executeQuery("select b from blobTable where a = ?", "random blob"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.data(forColumn: "b"), blob)
        XCTAssertEqual(rs.dataNoCopy(forColumn: "b"), blob)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
    }

    func testNullValues() throws {
        db.executeUpdate("create table t2 (a integer, b integer)")
        XCTAssertTrue(
            db.executeUpdate("insert into t2 values (?, ?)", nil, NSNumber(value: 5)), "Failed to insert a nil value")
        let rs = try XCTUnwrap(db.executeQuery("select * from t2"))
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertNil(rs.string(forColumnIndex: 0), "Wasn't able to retrieve a null string")
            XCTAssertEqual(rs.string(forColumnIndex: 1), "5")
        }
        XCTAssertEqual(rows, 1)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(db.hadError())
    }

    func testNestedResultSets() throws {
        let rs = try XCTUnwrap(db.executeQuery("select * from t3"))
        var rows = 0
        while rs.next() {
            rows += 1
            let foo = rs.int(forColumnIndex: 0)
            let newVal = foo + 100
            db.executeUpdate("update t3 set a = ? where a = ?", NSNumber(value: newVal), NSNumber(value: foo))
            let rs2 = try XCTUnwrap(db.executeQuery("select a from t3 where a = ?", NSNumber(value: newVal)))
            XCTAssertTrue(rs2.next())
            XCTAssertEqual(rs2.int(forColumnIndex: 0), newVal)
            rs2.close()
        }
        XCTAssertGreaterThanOrEqual(rows, 20)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(db.hadError())
    }

    func testNSNullInsertion() throws {
        db.executeUpdate("create table nulltest (a text, b text)")
        db.executeUpdate("insert into nulltest (a, b) values (?, ?)", NSNull(), "a")
        db.executeUpdate("insert into nulltest (a, b) values (?, ?)", nil, "b")
        let optional: String? = nil
        db.executeUpdate("insert into nulltest (a, b) values (?, ?)", optional as Any, "c")
        let rs = try XCTUnwrap(db.executeQuery("select * from nulltest"))
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertNil(rs.string(forColumnIndex: 0))
            XCTAssertNotNil(rs.string(forColumnIndex: 1))
        }
        XCTAssertEqual(rows, 3)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(db.hadError())
    }

    func testNullDates() throws {
        let date = Date()
        db.executeUpdate("create table datetest (a double, b double, c double)")
        db.executeUpdate("insert into datetest (a, b, c) values (?, ?, 0)", NSNull(), date)
        let rs = try XCTUnwrap(db.executeQuery("select * from datetest"))
        XCTAssertTrue(rs.next())
        let b = try XCTUnwrap(rs.date(forColumnIndex: 1))
        let c = try XCTUnwrap(rs.date(forColumnIndex: 2), "zero date shouldn't be nil")
        XCTAssertNil(rs.date(forColumnIndex: 0))
        XCTAssertEqual(b.timeIntervalSince(date), 0.0, accuracy: 1.0)
        XCTAssertEqual(c.timeIntervalSince1970, 0.0, accuracy: 1.0)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
    }

    func testLotsOfNULLs() throws {
        let blob = Data((0..<4096).map { UInt8($0 % 251) })
        db.executeUpdate("create table nulltest2 (s text, d data, i integer, f double, b integer)")
        db.executeUpdate(
            "insert into nulltest2 (s, d, i, f, b) values (?, ?, ?, ?, ?)",
            "Hi", blob, NSNumber(value: 12), NSNumber(value: Float(4.4)), NSNumber(value: true))
        db.executeUpdate("insert into nulltest2 (s, d, i, f, b) values (?, ?, ?, ?, ?)", nil, nil, nil, nil, NSNull())
        let rs = try XCTUnwrap(db.executeQuery("select * from nulltest2"))
        var rows = 0
        while rs.next() {
            rows += 1
            if rs.int(forColumnIndex: 2) == 12 {
                for index: Int32 in 0...4 { XCTAssertFalse(rs.columnIndexIsNull(index)) }
                XCTAssertTrue(rs.columnIndexIsNull(5))
                XCTAssertEqual(rs.data(forColumn: "d"), blob)
                XCTAssertNil(rs.data(forColumn: "notthere"))
                XCTAssertNil(rs.string(forColumnIndex: -2), "Negative columns should return nil results")
                XCTAssertTrue(rs.bool(forColumnIndex: 4))
                XCTAssertTrue(rs.bool(forColumn: "b"))
                XCTAssertEqual(4.4, rs.double(forColumn: "f"), accuracy: 0.0000001)
                XCTAssertEqual(rs.int(forColumn: "i"), 12)
                XCTAssertEqual(rs.int(forColumnIndex: 2), 12)
                XCTAssertEqual(rs.int(forColumnIndex: 12), 0, "Non-existent columns should return zero for ints")
                XCTAssertEqual(rs.int(forColumn: "notthere"), 0, "Non-existent columns should return zero for ints")
                XCTAssertEqual(rs.long(forColumn: "i"), 12)
                XCTAssertEqual(rs.longLongInt(forColumn: "i"), 12)
            } else {
                for index: Int32 in 0...5 { XCTAssertTrue(rs.columnIndexIsNull(index)) }
                XCTAssertNil(rs.data(forColumn: "d"))
            }
        }
        XCTAssertEqual(rows, 2)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
    }

    func testUTF8Strings() throws {
        db.executeUpdate("create table utest (a text)")
        db.executeUpdate("insert into utest values (?)", "/übertest")
        let rs = try XCTUnwrap(db.executeQuery("select * from utest where a = ?", "/übertest"))
        XCTAssertTrue(rs.next())
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(db.hadError())
    }

    func testArgumentsInArray() throws {
        db.executeUpdate("create table testOneHundredTwelvePointTwo (a text, b integer)")
        db.executeUpdate(
            "insert into testOneHundredTwelvePointTwo values (?, ?)", withArgumentsIn: ["one", NSNumber(value: 2)])
        db.executeUpdate(
            "insert into testOneHundredTwelvePointTwo values (?, ?)", withArgumentsIn: ["one", NSNumber(value: 3)])
        let rs = try XCTUnwrap(
            db.executeQuery(
                "select * from testOneHundredTwelvePointTwo where b > ?", withArgumentsIn: [NSNumber(value: 1)]))
        XCTAssertTrue(rs.next())
        XCTAssertTrue(rs.hasAnotherRow())
        XCTAssertFalse(db.hadError())
        XCTAssertEqual(rs.string(forColumnIndex: 0), "one")
        XCTAssertEqual(rs.int(forColumnIndex: 1), 2)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.int(forColumnIndex: 1), 3)
        XCTAssertFalse(rs.next())
        XCTAssertFalse(rs.hasAnotherRow())
    }

    func testColumnNamesContainingPeriods() throws {
        XCTAssertTrue(db.executeUpdate("create table t4 (a text, b text)"))
        db.executeUpdate("insert into t4 (a, b) values (?, ?)", "one", "two")
        var rs = try XCTUnwrap(db.executeQuery("select t4.a as 't4.a', t4.b from t4;"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "t4.a"), "one")
        XCTAssertEqual(rs.string(forColumn: "b"), "two")
        let utf8 = try XCTUnwrap(rs.utf8String(forColumn: "b"))
        XCTAssertEqual(utf8.withMemoryRebound(to: CChar.self, capacity: 4) { strcmp($0, "two") }, 0)
        rs.close()
        XCTAssertTrue(db.executeUpdate("drop table t4;", withArgumentsIn: []))
        XCTAssertTrue(db.executeUpdate("create table t4 (a text, b text)", withArgumentsIn: []))
        db.executeUpdate("insert into t4 (a, b) values (?, ?)", withArgumentsIn: ["one", "two"])
        rs = try XCTUnwrap(db.executeQuery("select t4.a as 't4.a', t4.b from t4;", withArgumentsIn: []))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "t4.a"), "one")
        XCTAssertEqual(rs.string(forColumn: "b"), "two")
        rs.close()
    }

    func testUpdateWithErrorAndBindings() throws {
        XCTAssertTrue(db.executeUpdate("create table t5 (a text, b int, c blob, d text, e text)"))
        XCTAssertNoThrow(
            try db.executeUpdate(
                "insert into t5 values (?, ?, ?, ?, ?)",
                values: ["text", NSNumber(value: 42), "BLOB", "d", NSNumber(value: 0)]))
        XCTAssertEqual(db.int(forQuery: "select b from t5"), 42)
    }

    func testSelectWithEmptyArgumentsArray() {
        XCTAssertNil(db.executeQuery("select * from test where a=?", withArgumentsIn: []))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_RANGE)
    }

    func testTooManyArgumentsIsAnError() {
        XCTAssertFalse(db.executeUpdate("insert into t3 (a) values (?)", 1, 2))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_RANGE)
        XCTAssertTrue(db.lastErrorMessage().contains("bind count"))
        XCTAssertEqual(db.int(forQuery: "select count(*) from t3"), 20)
    }

    func testDatabaseAttach() throws {
        let attachPath = directory.path("attachme.db")
        let dbB = FMDatabase(path: attachPath)
        XCTAssertTrue(dbB.open())
        XCTAssertTrue(dbB.executeUpdate("create table attached (a text)"))
        XCTAssertTrue(dbB.executeUpdate("insert into attached values (?)", "test"))
        dbB.close()
        XCTAssertFalse(dbB.isOpen)
        XCTAssertTrue(db.executeUpdate("attach database ? as attack", attachPath))
        let rs = try XCTUnwrap(db.executeQuery("select * from attack.attached"))
        XCTAssertTrue(rs.next())
        rs.close()
    }

    func testNamedParameters() throws {
        XCTAssertTrue(db.executeUpdate("create table namedparamtest (a text, b text, c integer, d double)"))
        let dictionaryArgs: [AnyHashable: Any] = [
            "a": "Text1", "b": "Text2", "c": NSNumber(value: 1), "d": NSNumber(value: 2.0),
        ]
        XCTAssertTrue(
            db.executeUpdate(
                "insert into namedparamtest values (:a, :b, :c, :d)", withParameterDictionary: dictionaryArgs))
        var rs = try XCTUnwrap(db.executeQuery("select * from namedparamtest"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "Text1")
        XCTAssertEqual(rs.string(forColumn: "b"), "Text2")
        XCTAssertEqual(rs.int(forColumn: "c"), 1)
        XCTAssertEqual(rs.double(forColumn: "d"), 2.0)
        rs.close()
        rs = try XCTUnwrap(
            db.executeQuery("select * from namedparamtest where b = :blah", withParameterDictionary: ["blah": "Text2"]))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "b"), "Text2")
        rs.close()
    }

    func testPragmaDatabaseList() {
        let rs = db.executeQuery("pragma database_list")
        var counter = 0
        while rs?.next() ?? false {
            counter += 1
            XCTAssertEqual(rs?.string(forColumn: "file"), databasePath)
        }
        XCTAssertEqual(counter, 1, "Only one database should be attached")
    }

    func testCachedStatementsInUse() {
        db.shouldCacheStatements = true
        db.executeUpdate("CREATE TABLE testCacheStatements(key INTEGER PRIMARY KEY, value INTEGER)")
        db.executeUpdate("INSERT INTO testCacheStatements (key, value) VALUES (1, 2)")
        db.executeUpdate("INSERT INTO testCacheStatements (key, value) VALUES (2, 4)")
        XCTAssertTrue(db.executeQuery("SELECT * FROM testCacheStatements WHERE key=1")?.next() ?? false)
        XCTAssertTrue(db.executeQuery("SELECT * FROM testCacheStatements WHERE key=1")?.next() ?? false)
    }

    /// Cached statements for several SQL texts used in turn (the cache remembers the last SQL it
    /// looked up), with one still in use by an open result set: each query gets its own statement.
    func testCachedStatementsAlternatingBetweenSQLTexts() throws {
        db.shouldCacheStatements = true
        XCTAssertTrue(db.executeUpdate("CREATE TABLE alternate (key INTEGER PRIMARY KEY, value TEXT)"))
        let insert = "INSERT INTO alternate (key, value) VALUES (?, ?)"
        let select = "SELECT value FROM alternate WHERE key = ?"
        for key in 1...10 {
            XCTAssertTrue(db.executeUpdate(insert, withArgumentsIn: [key, "v\(key)"]))
            let rs = try XCTUnwrap(db.executeQuery(select, withArgumentsIn: [key]))
            XCTAssertTrue(rs.next())
            XCTAssertEqual(rs.string(forColumnIndex: 0), "v\(key)")
            // The same SQL again while the first set is open: a second statement, not the one in use.
            let again = try XCTUnwrap(db.executeQuery(String(select.reversed().reversed()), withArgumentsIn: [1]))
            XCTAssertTrue(again.next())
            XCTAssertEqual(again.string(forColumnIndex: 0), "v1")
            XCTAssertEqual(rs.string(forColumnIndex: 0), "v\(key)", "the first set still reads its own row")
            again.close()
            rs.close()
        }
        db.clearCachedStatements()
        XCTAssertEqual(db.string(forQuery: select, 3), "v3", "works again after the cache is cleared")
    }

    func testStatementCachingWorks() throws {
        db.executeUpdate("CREATE TABLE testStatementCaching ( value INTEGER )")
        db.executeUpdate("INSERT INTO testStatementCaching( value ) VALUES (1)")
        db.executeUpdate("INSERT INTO testStatementCaching( value ) VALUES (1)")
        db.executeUpdate("INSERT INTO testStatementCaching( value ) VALUES (2)")
        db.shouldCacheStatements = true
        // The first time through no statement comes from the cache, the second time all do.
        for _ in 1...2 {
            let rs1 = try XCTUnwrap(db.executeQuery("SELECT rowid, * FROM testStatementCaching WHERE value = ?", 1))
            XCTAssertTrue(rs1.next())
            let rs2 = try XCTUnwrap(db.executeQuery("SELECT rowid, * FROM testStatementCaching WHERE value = ?", 2))
            XCTAssertTrue(rs2.next())
            // rs2 must not have taken over the cached statement rs1 is still using.
            XCTAssertTrue(rs1.next())
            XCTAssertEqual(rs1.int(forColumn: "value"), 1)
            rs1.close()
            rs2.close()
        }
    }

    func testDateFormat() throws {
        func testOneDateFormat(_ db: FMDatabase, _ testDate: Date) throws {
            db.executeUpdate("DROP TABLE IF EXISTS test_format")
            db.executeUpdate("CREATE TABLE test_format ( test TEXT )")
            db.executeUpdate("INSERT INTO test_format(test) VALUES (?)", testDate)
            let rs = try XCTUnwrap(db.executeQuery("SELECT test FROM test_format"))
            XCTAssertTrue(rs.next())
            XCTAssertEqual(rs.date(forColumnIndex: 0), testDate)
            rs.close()
        }
        let fmt = FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss")
        let testDate = try XCTUnwrap(fmt.date(from: "2013-02-20 12:00:00"))
        try testOneDateFormat(db, testDate)
        db.setDateFormat(fmt)
        XCTAssertTrue(db.hasDateFormatter())
        try testOneDateFormat(db, testDate)
        XCTAssertEqual(db.string(forQuery: "SELECT test FROM test_format"), "2013-02-20 12:00:00")
        XCTAssertEqual(db.string(from: testDate), "2013-02-20 12:00:00")
        XCTAssertEqual(db.date(from: "2013-02-20 12:00:00"), testDate)
    }

    func testColumnNameMap() throws {
        XCTAssertTrue(db.executeUpdate("create table colNameTest (a, b, c, d)"))
        XCTAssertTrue(db.executeUpdate("insert into colNameTest values (1, 2, 3, 4)"))
        let ars = try XCTUnwrap(db.executeQuery("select * from colNameTest"))
        let d = ars.columnNameToIndexMap
        XCTAssertEqual(d.count, 4)
        XCTAssertEqual(d["a"], 0)
        XCTAssertEqual(d["b"], 1)
        XCTAssertEqual(d["c"], 2)
        XCTAssertEqual(d["d"], 3)
    }

    func testCustomFunction() throws {
        db.executeUpdate("create table ftest (foo text)")
        for value in ["hello", "hi", "not h!", "definitely not h!"] {
            db.executeUpdate("insert into ftest values (?)", value)
        }
        let db = self.db!
        db.makeFunctionNamed("StringStartsWithH", arguments: 1) { context, _, argv in
            if db.valueType(argv[0]) == .text {
                let s = db.valueString(argv[0]) ?? ""
                db.resultInt(s.hasPrefix("h") ? 1 : 0, context: context)
            } else {
                db.resultNull(context: context)
            }
        }
        var rowCount = 0
        let ars = try XCTUnwrap(db.executeQuery("select * from ftest where StringStartsWithH(foo)"))
        while ars.next() { rowCount += 1 }
        XCTAssertEqual(rowCount, 2)
    }

    func testExecuteStatements() {
        var sql =
            "create table bulktest1 (id integer primary key autoincrement, x text);"
            + "create table bulktest2 (id integer primary key autoincrement, y text);"
            + "create table bulktest3 (id integer primary key autoincrement, z text);"
            + "insert into bulktest1 (x) values ('XXX');"
            + "insert into bulktest2 (y) values ('YYY');"
            + "insert into bulktest3 (z) values ('ZZZ');"
        XCTAssertTrue(db.executeStatements(sql), "bulk create")
        sql =
            "select count(*) as count from bulktest1;"
            + "select count(*) as count from bulktest2;"
            + "select count(*) as count from bulktest3;"
        var calls = 0
        let success = db.executeStatements(sql) { dictionary in
            calls += 1
            XCTAssertEqual(dictionary["count"] as? String, "1", "expected one record for dictionary \(dictionary)")
            return 0
        }
        XCTAssertTrue(success, "bulk select")
        XCTAssertEqual(calls, 3)
        XCTAssertTrue(
            db.executeStatements("drop table bulktest1; drop table bulktest2; drop table bulktest3;"), "bulk drop")
    }

    func testExecuteStatementsBlockCanStop() {
        var calls = 0
        let success = db.executeStatements("select 1; select 2; select NULL as n;") { _ in
            calls += 1
            return 1
        }
        XCTAssertFalse(success)
        XCTAssertEqual(calls, 1)
        XCTAssertEqual(db.lastErrorCode(), SQLITE_ABORT)
        var nulls = 0
        db.executeStatements("select NULL as n") { row in
            if row["n"] is NSNull { nulls += 1 }
            return 0
        }
        XCTAssertEqual(nulls, 1)
    }

    func testCharAndBoolTypes() throws {
        XCTAssertTrue(db.executeUpdate("create table charBoolTest (a, b, c)"))
        XCTAssertTrue(
            db.executeUpdate(
                "insert into charBoolTest values (?, ?, ?)", NSNumber(value: true), NSNumber(value: false),
                NSNumber(value: Int8(120))))
        let rs = try XCTUnwrap(db.executeQuery("select * from charBoolTest"))
        XCTAssertTrue(rs.next(), "Did not return row")
        XCTAssertEqual(rs.bool(forColumn: "a"), true)
        XCTAssertEqual(rs.object(forColumn: "a") as? NSNumber, NSNumber(value: 1))
        XCTAssertEqual(rs.bool(forColumn: "b"), false)
        XCTAssertEqual(rs.object(forColumn: "b") as? NSNumber, NSNumber(value: 0))
        XCTAssertEqual(rs.int(forColumn: "c"), 120)
        rs.close()
        XCTAssertTrue(db.executeUpdate("drop table charBoolTest"), "Did not drop table")
    }

    func testSqliteLibVersion() {
        let version = FMDatabase.sqliteLibVersion()
        XCTAssertEqual(version.compare("3.7", options: .numeric), .orderedDescending, "earlier than 3.7")
        XCTAssertEqual(version.compare("4.0", options: .numeric), .orderedAscending, "not earlier than 4.0")
        XCTAssertEqual(FMDatabase.fmdbUserVersion(), "2.7.12")
    }

    func testIsThreadSafe() {
        XCTAssertTrue(FMDatabase.isSQLiteThreadSafe(), "not threadsafe")
    }

    func testOpenNilPath() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (bar text)"), "create failed")
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["baz"]), "insert failed")
        XCTAssertEqual(db.string(forQuery: "select bar from foo"), "baz")
        XCTAssertNil(db.databasePath)
        XCTAssertNil(db.databaseURL)
    }

    func testOpenZeroLengthPath() {
        let db = FMDatabase(path: "")
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (bar text)"), "create failed")
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["baz"]), "insert failed")
        XCTAssertEqual(db.string(forQuery: "select bar from foo"), "baz")
    }

    func testOpenTwice() {
        let db = FMDatabase()
        db.open()
        XCTAssertTrue(db.open(), "Double open failed")
    }

    func testOpenURL() throws {
        let url = directory.url.appendingPathComponent("url.db")
        let db = FMDatabase(url: url)
        XCTAssertTrue(db.open())
        XCTAssertEqual(db.databaseURL?.path, url.path)
        XCTAssertEqual(db.databasePath, url.path)
        db.close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: url.path))
    }

    func testInvalid() {
        let db = FMDatabase(path: directory.path("nonexistentfolder/test.sqlite"))
        XCTAssertFalse(db.open(), "open did NOT fail")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_CANTOPEN)
        XCTAssertTrue(db.hadError())
    }

    func testChangingMaxBusyRetryTimeInterval() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        let originalInterval = db.maxBusyRetryTimeInterval
        let updatedInterval = originalInterval > 0 ? originalInterval + 1 : 1
        db.maxBusyRetryTimeInterval = updatedInterval
        XCTAssertEqual(db.maxBusyRetryTimeInterval, updatedInterval, accuracy: 1e-5)
    }

    func testChangingMaxBusyRetryTimeIntervalDatabaseNotOpened() {
        let db = FMDatabase()
        let originalInterval = db.maxBusyRetryTimeInterval
        db.maxBusyRetryTimeInterval = originalInterval > 0 ? originalInterval + 1 : 1
        XCTAssertNotEqual(originalInterval, db.maxBusyRetryTimeInterval)
    }

    func testZeroMaxBusyRetryTimeInterval() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        db.maxBusyRetryTimeInterval = 0
        XCTAssertEqual(db.maxBusyRetryTimeInterval, 0, "busy handler not disabled")
    }

    func testCloseOpenResultSets() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (bar text)"), "create failed")
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["baz"]), "insert failed")
        let rs = db.executeQuery("select bar from foo")
        XCTAssertTrue(db.hasOpenResultSets)
        db.closeOpenResultSets()
        XCTAssertFalse(db.hasOpenResultSets)
        XCTAssertFalse(rs?.next() ?? true, "step should have failed")
    }

    func testGoodConnection() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.goodConnection, "no good connection")
    }

    func testBadConnection() {
        let db = FMDatabase()
        XCTAssertFalse(db.goodConnection, "no good connection")
    }

    func testLastRowId() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (foo_id integer primary key autoincrement, bar text)"))
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["baz"]))
        let firstRowId = db.lastInsertRowId
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["qux"]))
        XCTAssertEqual(db.lastInsertRowId - firstRowId, 1, "rowid should have incremented")
    }

    func testChanges() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (foo_id integer primary key autoincrement, bar text)"))
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["baz"]))
        XCTAssertTrue(db.executeUpdate("insert into foo (bar) values (?)", withArgumentsIn: ["qux"]))
        XCTAssertTrue(db.executeUpdate("update foo set bar = ?", withArgumentsIn: ["xxx"]))
        XCTAssertEqual(db.changes, 2, "two rows should have changed")
    }

    func testBind() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (id integer primary key autoincrement, a numeric)"))
        func roundTrip(_ value: Any, _ read: () -> NSNumber, _ expected: NSNumber, line: UInt = #line) {
            XCTAssertTrue(
                db.executeUpdate("insert into foo (a) values (?)", withArgumentsIn: [value]), "insert failed",
                line: line)
            XCTAssertEqual(read(), expected, "values don't match", line: line)
        }
        let last = { NSNumber(value: db.lastInsertRowId) }
        let asInt = { NSNumber(value: db.int(forQuery: "select a from foo where id = ?", last())) }
        let asLong = { NSNumber(value: db.long(forQuery: "select a from foo where id = ?", last())) }
        let asDouble = { NSNumber(value: db.double(forQuery: "select a from foo where id = ?", last())) }
        roundTrip(NSNumber(value: Int8(51)), asInt, 51)
        roundTrip(NSNumber(value: UInt8(52)), asInt, 52)
        roundTrip(NSNumber(value: Int16(53)), asInt, 53)
        roundTrip(NSNumber(value: UInt16(54)), asInt, 54)
        roundTrip(NSNumber(value: Int32(54)), asInt, 54)
        roundTrip(NSNumber(value: UInt32(55)), asInt, 55)
        roundTrip(NSNumber(value: 56), asLong, 56)
        roundTrip(NSNumber(value: UInt(57)), asLong, 57)
        roundTrip(NSNumber(value: Int64(56)), asLong, 56)
        roundTrip(NSNumber(value: UInt64(57)), asLong, 57)
        roundTrip(NSNumber(value: Float(58)), asDouble, 58)
        roundTrip(NSNumber(value: 59.0), asDouble, 59)
        roundTrip(Int8(60), asInt, 60)
        roundTrip(UInt16(61), asInt, 61)
        roundTrip(Float(62.5), asDouble, 62.5)
        XCTAssertTrue(db.executeUpdate("insert into foo (a) values (?)", withArgumentsIn: [true]))
        XCTAssertTrue(db.bool(forQuery: "select a from foo where id = ?", last()))
    }

    func testStepError() {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (id integer primary key)"))
        XCTAssertNoThrow(try db.executeUpdate("insert into foo (id) values (?)", values: [1]))
        XCTAssertThrowsError(try db.executeUpdate("insert into foo (id) values (?)", values: [1])) { error in
            XCTAssertEqual(nsError(error).code, 19, "error code 19 should have been generated")
            XCTAssertEqual((error as? FMDatabaseError)?.extendedCode, 1555)
        }
    }
}
