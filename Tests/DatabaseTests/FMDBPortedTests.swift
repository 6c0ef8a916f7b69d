import FMDB
import Foundation
import XCTest

/// FMDB 2.7's own `Tests/FMDatabaseTests.m` methods that no other test class ported yet,
/// rewritten in Swift against the same API (each test has its own temporary database).
/// As in FMDB's FMDBTempDBTests, every test runs with statement caching on.
final class FMDBPortedTests: FMDBTempDBTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        db.shouldCacheStatements = true
    }

    override class func populateDatabase(_ db: FMDatabase) {
        db.executeUpdate("create table test (a text, b text, c integer, d double, e double)")
        db.beginTransaction()
        for i in 1...20 {
            db.executeUpdate(
                "insert into test (a, b, c, d, e) values (?, ?, ?, ?, ?)",
                "hi'", "number \(i)", i, Date(), Float(2.2))
        }
        db.commit()
    }

    // MARK: - Invalid column names and indexes (FMDB testInvalidColumnNames / testInvalidColumnIndexes)

    func testInvalidColumnNames() throws {
        let rs = try XCTUnwrap(db.executeQuery("select rowid, a, b, c from test"))
        let invalidColumnName = "foobar"
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertNil(rs[invalidColumnName], "Invalid column name should return nil")
            XCTAssertNil(rs.string(forColumn: invalidColumnName))
            XCTAssertNil(rs.utf8String(forColumn: invalidColumnName))
            XCTAssertNil(rs.date(forColumn: invalidColumnName))
            XCTAssertNil(rs.data(forColumn: invalidColumnName))
            XCTAssertNil(rs.dataNoCopy(forColumn: invalidColumnName))
            XCTAssertNil(rs.object(forColumn: invalidColumnName))
            // the valid names still answer, so the nils above are about the name
            XCTAssertEqual(rs.string(forColumn: "a"), "hi'")
        }
        XCTAssertEqual(rows, 20)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
    }

    func testInvalidColumnIndexes() throws {
        let rs = try XCTUnwrap(db.executeQuery("select rowid, a, b, c from test"))
        let invalidColumnIndex: Int32 = 999
        var rows = 0
        while rs.next() {
            rows += 1
            XCTAssertNil(rs[invalidColumnIndex], "Invalid column index should return nil")
            XCTAssertNil(rs.string(forColumnIndex: invalidColumnIndex))
            XCTAssertNil(rs.utf8String(forColumnIndex: invalidColumnIndex))
            XCTAssertNil(rs.date(forColumnIndex: invalidColumnIndex))
            XCTAssertNil(rs.data(forColumnIndex: invalidColumnIndex))
            XCTAssertNil(rs.dataNoCopy(forColumnIndex: invalidColumnIndex))
            XCTAssertNil(rs.object(forColumnIndex: invalidColumnIndex))
            XCTAssertEqual(rs.string(forColumnIndex: 1), "hi'")
        }
        XCTAssertEqual(rows, 20)
        rs.close()
        XCTAssertFalse(db.hasOpenResultSets, "Shouldn't have any open result sets")
        XCTAssertFalse(db.hadError(), "Shouldn't have any errors")
    }

    // MARK: - Format strings (Swift reads FMDB's `...WithFormat:` as string interpolation)

    func testFormatStringParsing() throws {
        XCTAssertTrue(db.executeUpdate("create table t5 (a text, b int, c blob, d text, e text)"))
        let cString = "text"
        let character: Character = "d"
        XCTAssertTrue(
            db.executeUpdate(
                withFormat:
                    "insert into t5 values (\(cString), \(42), \("BLOB"), \(character), \(Int64(12_345_678_901_234)))"))

        let rs = try XCTUnwrap(
            db.executeQuery(withFormat: "select * from t5 where a = \(cString) and a = \("text") and b = \(42)"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "text")
        XCTAssertEqual(rs.int(forColumn: "b"), 42)
        XCTAssertEqual(rs.string(forColumn: "c"), "BLOB")
        XCTAssertEqual(rs.string(forColumn: "d"), "d")
        XCTAssertEqual(rs.longLongInt(forColumn: "e"), 12_345_678_901_234)
        rs.close()
    }

    func testFormatStringParsingWithSizePrefixes() throws {
        XCTAssertTrue(db.executeUpdate("create table t55 (a text, b int, c float)"))
        let testShort: Int16 = -4
        let testFloat: Float = 5.5
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into t55 values (\("a"), \(testShort), \(testFloat))"))
        let testUShort: UInt16 = 6
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into t55 values (\("a"), \(testUShort), \(testFloat))"))

        let rs = try XCTUnwrap(db.executeQuery(withFormat: "select * from t55 where a = \("a") order by 2"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "a")
        XCTAssertEqual(rs.int(forColumn: "b"), -4)
        XCTAssertEqual(rs.string(forColumn: "c"), "5.5")
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.string(forColumn: "a"), "a")
        XCTAssertEqual(rs.int(forColumn: "b"), 6)
        XCTAssertEqual(rs.string(forColumn: "c"), "5.5")
        XCTAssertFalse(rs.next())
    }

    func testFormatStringParsingWithNilValue() throws {
        XCTAssertTrue(db.executeUpdate("create table tatwhat (a text)"))
        let missing: String? = nil
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into tatwhat values(\(missing))"))
        let rs = try XCTUnwrap(db.executeQuery(withFormat: "select * from tatwhat"))
        XCTAssertTrue(rs.next())
        XCTAssertTrue(rs.columnIndexIsNull(0))
        XCTAssertFalse(rs.next())
    }

    func testFormatStrings() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open(), "open failed")
        XCTAssertTrue(db.executeUpdate("create table foo (id integer primary key autoincrement, a numeric)"))

        let insertedChar: Character = "A"
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into foo (a) values (\(insertedChar))"))
        XCTAssertEqual(db.string(forQuery: "select a from foo where id = ?", db.lastInsertRowId), "A")

        let insertedString = "baz"
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into foo (a) values (\(insertedString))"))
        XCTAssertEqual(db.string(forQuery: "select a from foo where id = ?", db.lastInsertRowId), insertedString)

        let insertedInt: Int32 = 42
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into foo (a) values (\(insertedInt))"))
        XCTAssertEqual(db.int(forQuery: "select a from foo where id = ?", db.lastInsertRowId), insertedInt)

        let insertedUnsignedInt: UInt32 = 43
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into foo (a) values (\(insertedUnsignedInt))"))
        XCTAssertEqual(db.int(forQuery: "select a from foo where id = ?", db.lastInsertRowId), 43)

        let insertedFloat: Float = 44
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into foo (a) values (\(insertedFloat))"))
        XCTAssertEqual(Float(db.double(forQuery: "select a from foo where id = ?", db.lastInsertRowId)), insertedFloat)

        let insertedUnsignedLongLong: UInt64 = 45
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into foo (a) values (\(insertedUnsignedLongLong))"))
        XCTAssertEqual(db.long(forQuery: "select a from foo where id = ?", db.lastInsertRowId), 45)
        XCTAssertEqual(db.int(forQuery: "select count(*) from foo"), 6)
        db.close()
    }

    // MARK: - Custom functions (FMDB's createCustomFunctions and the tests that use it)

    private func createCustomFunctions() {
        let db = self.db!
        db.makeFunctionNamed("RemoveDiacritics", arguments: 1) { context, _, argv in
            let type = db.valueType(argv[0])
            if type == .null {
                db.resultNull(context: context)
                return
            }
            guard type == .text else {
                db.resultError("Expected text", context: context)
                return
            }
            let string = db.valueString(argv[0]) ?? ""
            db.resultString(string.folding(options: .diacriticInsensitive, locale: nil), context: context)
        }
        db.makeFunctionNamed("Hypotenuse", arguments: 2) { context, _, argv in
            let type1 = db.valueType(argv[0])
            let type2 = db.valueType(argv[1])
            if type1 != .float && type1 != .integer && type2 != .float && type2 != .integer {
                db.resultError("Expected numeric", context: context)
                return
            }
            db.resultDouble(hypot(db.valueDouble(argv[0]), db.valueDouble(argv[1])), context: context)
        }
        db.makeFunctionNamed("SetAlternatingByteToOne", arguments: 1) { context, _, argv in
            guard db.valueType(argv[0]) == .blob else {
                db.resultError("Expected blob", context: context)
                return
            }
            var data = db.valueData(argv[0]) ?? Data()
            for i in stride(from: data.startIndex, to: data.endIndex, by: 2) {
                data[i] = 1
            }
            db.resultData(data, context: context)
        }
    }

    func testCustomStringFunction() throws {
        createCustomFunctions()
        let rs = try XCTUnwrap(db.executeQuery("SELECT RemoveDiacritics(?)", "José"))
        XCTAssertTrue(rs.next(), "Should have returned value")
        XCTAssertEqual(rs.string(forColumnIndex: 0), "Jose")
        rs.close()
    }

    func testFailCustomStringFunction() throws {
        createCustomFunctions()
        let rs = try XCTUnwrap(
            db.executeQuery("SELECT RemoveDiacritics(?)", Double.pi), "Prepare should have succeeded")
        XCTAssertThrowsError(try rs.nextWithError(), "'next' should have failed") { error in
            XCTAssertEqual((error as NSError).localizedDescription, "Expected text")
            XCTAssertEqual((error as NSError).domain, "FMDatabase")
        }
        XCTAssertNil(db.executeQuery("SELECT RemoveDiacritics('jose','ortega')"))
        let error = db.lastError() as NSError
        XCTAssertEqual(error.code, Int(SQLITE_ERROR))
        XCTAssertTrue(
            error.localizedDescription.contains("wrong number of arguments"),
            "Should get wrong number of arguments error, but got '\(error.localizedDescription)'")
    }

    func testCustomDoubleFunction() throws {
        createCustomFunctions()
        let rs = try XCTUnwrap(db.executeQuery("SELECT Hypotenuse(?, ?)", 3.0, 4.0))
        XCTAssertTrue(rs.next(), "Should have returned value")
        XCTAssertEqual(rs.double(forColumnIndex: 0), 5.0)
        rs.close()
    }

    func testCustomIntFunction() throws {
        createCustomFunctions()
        let rs = try XCTUnwrap(db.executeQuery("SELECT Hypotenuse(?, ?)", 3, 4))
        XCTAssertTrue(rs.next(), "Should have returned value")
        XCTAssertEqual(rs.int(forColumnIndex: 0), 5)
        rs.close()
    }

    func testFailCustomNumericFunction() throws {
        createCustomFunctions()
        let rs = try XCTUnwrap(db.executeQuery("SELECT Hypotenuse(?, ?)", "foo", "bar"))
        XCTAssertThrowsError(try rs.nextWithError(), "Should have failed") { error in
            XCTAssertEqual((error as NSError).localizedDescription, "Expected numeric")
        }
        XCTAssertNil(db.executeQuery("SELECT Hypotenuse(?)", 3.0), "Should fail for wrong number of arguments")
        let error = db.lastError() as NSError
        XCTAssertTrue(
            error.localizedDescription.contains("wrong number of arguments"),
            "Should get wrong number of arguments error, but got '\(error.localizedDescription)'")
    }

    func testCustomDataFunction() throws {
        createCustomFunctions()
        let data = Data((0..<256).map { UInt8($0) })
        let rs = try XCTUnwrap(db.executeQuery("SELECT SetAlternatingByteToOne(?)", data))
        XCTAssertTrue(rs.next(), "Should have returned value")
        let result = try XCTUnwrap(rs.data(forColumnIndex: 0), "should have result")
        XCTAssertEqual(result.count, 256)
        for (i, byte) in result.enumerated() {
            XCTAssertEqual(byte, i % 2 == 0 ? 1 : UInt8(i), "byte \(i)")
        }
        rs.close()
    }

    func testFailCustomDataFunction() throws {
        createCustomFunctions()
        let rs = try XCTUnwrap(db.executeQuery("SELECT SetAlternatingByteToOne(?)", "foo"), "Query should succeed")
        XCTAssertThrowsError(try rs.nextWithError(), "Performing SetAlternatingByteToOne with string should fail") {
            error in
            XCTAssertEqual((error as NSError).localizedDescription, "Expected blob")
        }
    }

    func testCustomFunctionNullValues() throws {
        let db = self.db!
        let seen = ValuesSeen()
        db.makeFunctionNamed("FunctionThatDoesntTestTypes", arguments: 1) { context, _, argv in
            seen.data = db.valueData(argv[0])
            seen.string = db.valueString(argv[0])
            seen.int = db.valueInt(argv[0])
            seen.long = db.valueLong(argv[0])
            seen.double = db.valueDouble(argv[0])
            seen.called = true
            db.resultInt(42, context: context)
        }
        let rs = try XCTUnwrap(
            db.executeQuery("SELECT FunctionThatDoesntTestTypes(?)", NSNull()), "Creating query should succeed")
        XCTAssertTrue(try rs.nextWithError(), "Performing query should succeed")
        XCTAssertEqual(rs.int(forColumnIndex: 0), 42)
        XCTAssertTrue(seen.called)
        XCTAssertNil(seen.data)
        XCTAssertNil(seen.string)
        XCTAssertEqual(seen.int, 0)
        XCTAssertEqual(seen.long, 0)
        XCTAssertEqual(seen.double, 0.0)
        rs.close()
    }

    func testCustomFunctionIntResult() throws {
        let db = self.db!
        db.makeFunctionNamed("IntResultFunction", arguments: 0) { context, _, _ in
            db.resultInt(42, context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT IntResultFunction()"), "Creating query should succeed")
        XCTAssertTrue(rs.next(), "Performing query should succeed")
        XCTAssertEqual(rs.int(forColumnIndex: 0), 42)
        rs.close()
    }

    func testCustomFunctionLongResult() throws {
        let db = self.db!
        db.makeFunctionNamed("LongResultFunction", arguments: 0) { context, _, _ in
            db.resultLong(42, context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT LongResultFunction()"), "Creating query should succeed")
        XCTAssertTrue(rs.next(), "Performing query should succeed")
        XCTAssertEqual(rs.long(forColumnIndex: 0), 42)
        rs.close()
    }

    func testCustomFunctionDoubleResult() throws {
        let db = self.db!
        db.makeFunctionNamed("DoubleResultFunction", arguments: 0) { context, _, _ in
            db.resultDouble(0.1, context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT DoubleResultFunction()"), "Creating query should succeed")
        XCTAssertTrue(rs.next(), "Performing query should succeed")
        XCTAssertEqual(rs.double(forColumnIndex: 0), 0.1)
        rs.close()
    }

    func testCustomFunctionNullResult() throws {
        let db = self.db!
        db.makeFunctionNamed("NullResultFunction", arguments: 0) { context, _, _ in
            db.resultNull(context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT NullResultFunction()"), "Creating query should succeed")
        XCTAssertTrue(rs.next(), "Performing query should succeed")
        XCTAssertTrue(rs.object(forColumnIndex: 0) is NSNull)
        rs.close()
    }

    func testCustomFunctionErrorResult() throws {
        let db = self.db!
        db.makeFunctionNamed("ErrorResultFunction", arguments: 0) { context, _, _ in
            db.resultError("foo", context: context)
            db.resultErrorCode(42, context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT ErrorResultFunction()"), "Creating query should succeed")
        XCTAssertThrowsError(try rs.nextWithError(), "Performing query should fail.") { error in
            XCTAssertEqual((error as NSError).localizedDescription, "foo")
            XCTAssertEqual((error as NSError).code, 42)
        }
    }

    func testCustomFunctionTooBigErrorResult() throws {
        let db = self.db!
        db.makeFunctionNamed("TooBigErrorResultFunction", arguments: 0) { context, _, _ in
            db.resultErrorTooBig(context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT TooBigErrorResultFunction()"), "Creating query should succeed")
        XCTAssertThrowsError(try rs.nextWithError(), "Performing query should fail.") { error in
            XCTAssertEqual((error as NSError).localizedDescription, "string or blob too big")
            XCTAssertEqual((error as NSError).code, Int(SQLITE_TOOBIG))
        }
    }

    func testCustomFunctionNoMemoryErrorResult() throws {
        let db = self.db!
        db.makeFunctionNamed("NoMemoryErrorResultFunction", arguments: 0) { context, _, _ in
            db.resultErrorNoMemory(context: context)
        }
        let rs = try XCTUnwrap(db.executeQuery("SELECT NoMemoryErrorResultFunction()"), "Creating query should succeed")
        XCTAssertThrowsError(try rs.nextWithError(), "Performing query should fail.") { error in
            XCTAssertEqual((error as NSError).localizedDescription, "out of memory")
            XCTAssertEqual((error as NSError).code, Int(SQLITE_NOMEM))
        }
    }

    // MARK: - FMDatabaseQueueTests.m methods not ported elsewhere

    func testInvalidURL() {
        let fileURL = directory.url.appendingPathComponent(UUID().uuidString).appendingPathComponent("test.sqlite")
        XCTAssertNil(FMDatabaseQueue(url: fileURL), "Database queue should not be returned for invalid path")
    }

    func testURLOpenWithOptions() {
        let fileURL = directory.url.appendingPathComponent(UUID().uuidString)
        XCTAssertNil(
            FMDatabaseQueue(url: fileURL, flags: SQLITE_OPEN_READWRITE), "Database queue should not have been created")
        XCTAssertFalse(FileManager.default.fileExists(atPath: fileURL.path))
    }

    func testURLOpenInitWithOptions() throws {
        let fileURL = directory.url.appendingPathComponent(UUID().uuidString)
        XCTAssertNil(
            FMDatabaseQueue(url: fileURL, flags: SQLITE_OPEN_READWRITE), "Database queue should not have been created")

        var queue = try XCTUnwrap(
            FMDatabaseQueue(url: fileURL, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE),
            "Database queue should have been created")
        queue.inDatabase { db in
            XCTAssertTrue(db.executeUpdate("CREATE TABLE foo (bar INT)"), "Create failed")
            XCTAssertTrue(db.executeUpdate("INSERT INTO foo (bar) VALUES (?)", 42), "Insert failed")
        }
        queue.close()

        queue = try XCTUnwrap(
            FMDatabaseQueue(url: fileURL, flags: SQLITE_OPEN_READONLY), "Now database queue should open")
        XCTAssertEqual(queue.openFlags, SQLITE_OPEN_READONLY)
        var ran = false
        queue.inDatabase { db in
            ran = true
            XCTAssertFalse(
                db.executeUpdate("CREATE TABLE baz (qux INT)"), "But updates should fail on read only database")
            XCTAssertEqual(db.int(forQuery: "SELECT bar FROM foo"), 42)
        }
        XCTAssertTrue(ran)
        queue.close()
    }

    func testURLOpenWithOptionsVfs() throws {
        guard var vfs = sqlite3_vfs_find(nil)?.pointee else { return XCTFail("no default VFS") }
        let name = strdup("MyCustomQueueVFS")
        vfs.zName = UnsafePointer(name)
        let registered = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        registered.initialize(to: vfs)
        XCTAssertEqual(SQLITE_OK, sqlite3_vfs_register(registered, 0))
        defer {
            sqlite3_vfs_unregister(registered)
            registered.deallocate()
            free(name)
        }
        let fileURL = directory.url.appendingPathComponent(UUID().uuidString)
        let queue = try XCTUnwrap(
            FMDatabaseQueue(url: fileURL, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: "MyCustomQueueVFS"),
            "Database queue should have been created")
        XCTAssertEqual(queue.vfsName, "MyCustomQueueVFS")
        queue.inDatabase { db in
            XCTAssertTrue(db.executeUpdate("create table t (a)"))
        }
        queue.close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: fileURL.path))
    }

    /// A block that closes the queue's database does not break the queue: the next block gets it reopened.
    func testClose() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: databasePath))
        queue.inDatabase { adb in
            XCTAssertTrue(adb.executeUpdate("CREATE TABLE close_test (a INTEGER)"))
            XCTAssertTrue(adb.executeUpdate("INSERT INTO close_test VALUES (1)"))
            adb.close()
        }
        var ran = false
        queue.inDatabase { adb in
            ran = true
            let ars = adb.executeQuery("select * from close_test")
            XCTAssertNotNil(ars)
            XCTAssertTrue(ars?.next() ?? false)
            XCTAssertEqual(ars?.int(forColumnIndex: 0), 1)
            ars?.close()
        }
        XCTAssertTrue(ran)
        queue.close()
    }

    // MARK: - FMDB 2.7 source behaviours its tests rely on without naming them

    /// FMDB reads `lastError*` from `sqlite3_errcode`/`sqlite3_errmsg`: after a success that is 0, "not an error".
    func testLastErrorWithoutAnError() throws {
        XCTAssertEqual(db.int(forQuery: "select count(*) from test"), 20)
        XCTAssertFalse(db.hadError())
        XCTAssertEqual(db.lastErrorCode(), SQLITE_OK)
        XCTAssertEqual(db.lastErrorMessage(), "not an error")
        let error = db.lastError() as NSError
        XCTAssertEqual(error.domain, "FMDatabase")
        XCTAssertEqual(error.code, 0)
    }

    /// In FMDB an error lasts until the next call on the connection, which resets it (`sqlite3_errcode`).
    func testHadErrorIsResetByTheNextSuccess() throws {
        XCTAssertNil(db.executeQuery("select * from nosuchtable"))
        XCTAssertTrue(db.hadError())
        XCTAssertEqual(db.lastErrorCode(), SQLITE_ERROR)
        XCTAssertTrue(db.lastErrorMessage().contains("nosuchtable"))
        let rs = try XCTUnwrap(db.executeQuery("select a from test"))
        XCTAssertFalse(db.hadError())
        XCTAssertEqual(db.lastErrorCode(), SQLITE_OK)
        rs.close()
        XCTAssertFalse(db.executeUpdate("insert into nosuchtable values (1)"))
        XCTAssertTrue(db.hadError())
        XCTAssertTrue(db.executeUpdate("insert into test (a) values (?)", "ok"))
        XCTAssertFalse(db.hadError())
    }

    /// FMDB's `storeableDateFormat:` is fixed to en_US_POSIX and GMT, whatever the user's locale and zone.
    func testStoreableDateFormatIsPOSIXAndGMT() throws {
        let fmt = FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss")
        XCTAssertEqual(fmt.locale.identifier, "en_US_POSIX")
        XCTAssertEqual(fmt.timeZone.secondsFromGMT(), 0)
        XCTAssertEqual(fmt.dateFormat, "yyyy-MM-dd HH:mm:ss")
        XCTAssertEqual(fmt.string(from: Date(timeIntervalSince1970: 0)), "1970-01-01 00:00:00")
        db.setDateFormat(fmt)
        XCTAssertTrue(db.hasDateFormatter())
        XCTAssertTrue(db.executeUpdate("create table df (d)"))
        XCTAssertTrue(db.executeUpdate("insert into df values (?)", Date(timeIntervalSince1970: 86_400)))
        XCTAssertEqual(db.string(forQuery: "select d from df"), "1970-01-02 00:00:00")
        XCTAssertEqual(db.date(forQuery: "select d from df"), Date(timeIntervalSince1970: 86_400))
        db.setDateFormat(nil)
        XCTAssertFalse(db.hasDateFormatter())
    }

    /// FMDB's `columnNameForIndex:` wraps `sqlite3_column_name`, which is NULL out of range: nil.
    func testColumnNameForInvalidIndex() throws {
        let rs = try XCTUnwrap(db.executeQuery("select a, b as bee from test"))
        XCTAssertEqual(rs.columnCount, 2)
        XCTAssertEqual(rs.columnName(for: 0), "a")
        XCTAssertEqual(rs.columnName(for: 1), "bee")
        XCTAssertNil(rs.columnName(for: 2))
        XCTAssertNil(rs.columnName(for: -1))
        rs.close()
    }

    /// FMDB's `executeStatements:` is `sqlite3_exec`: it stops at the first failing statement, keeps what ran
    /// before it (autocommit), and reports the error.
    func testExecuteStatementsStopsAtTheFirstError() {
        XCTAssertFalse(
            db.executeStatements("create table bulk4 (a); insert into nosuchtable values (1); create table bulk5 (a);"))
        XCTAssertTrue(db.hadError())
        XCTAssertEqual(db.lastErrorCode(), SQLITE_ERROR)
        XCTAssertTrue(db.tableExists("bulk4"))
        XCTAssertFalse(db.tableExists("bulk5"))
    }

    /// FMDB's result block gets every value as text and NULL as NSNull, keyed by column name.
    func testExecuteStatementsResultBlockValues() {
        var rows: [[AnyHashable: Any]] = []
        XCTAssertTrue(
            db.executeStatements("select null as n, 1 as one, 2.5 as f, 'x' as s") { dictionary in
                rows.append(dictionary)
                return 0
            })
        XCTAssertEqual(rows.count, 1)
        let row = rows.first ?? [:]
        XCTAssertEqual(row.count, 4)
        XCTAssertTrue(row["n"] is NSNull)
        XCTAssertEqual(row["one"] as? String, "1")
        XCTAssertEqual(row["f"] as? String, "2.5")
        XCTAssertEqual(row["s"] as? String, "x")
    }

    /// `values: nil` and a nil parameter dictionary mean "no arguments", as in FMDB.
    func testNilArgumentsMeanNone() throws {
        try db.executeUpdate("create table nilargs (a)", values: nil)
        try db.executeUpdate("insert into nilargs values (7)", values: nil)
        let rs = try db.executeQuery("select a from nilargs", values: nil)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.int(forColumnIndex: 0), 7)
        rs.close()
        let rs2 = try XCTUnwrap(db.executeQuery("select a from nilargs", withParameterDictionary: nil))
        XCTAssertTrue(rs2.next())
        XCTAssertEqual(rs2.int(forColumnIndex: 0), 7)
        rs2.close()
    }

    /// FMDB's typed getters are SQLite's conversions: `dateForColumn` without a formatter is
    /// `timeIntervalSince1970` of the column's double value, `boolForColumn` is `intForColumn != 0`,
    /// `intForColumn` is `sqlite3_column_int` (the low 32 bits), `dataForColumn` of text is its bytes.
    func testTypedGettersFollowSQLiteConversions() throws {
        XCTAssertTrue(db.executeUpdate("create table conv (t text, r real, big integer, tx text)"))
        XCTAssertTrue(db.executeUpdate("insert into conv values (?, ?, ?, ?)", "abc", 0.5, Int64(1) << 40 | 7, "12abc"))
        let rs = try XCTUnwrap(db.executeQuery("select * from conv"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.date(forColumn: "t"), Date(timeIntervalSince1970: 0))
        XCTAssertEqual(rs.date(forColumn: "r"), Date(timeIntervalSince1970: 0.5))
        XCTAssertFalse(rs.bool(forColumn: "r"), "0.5 as int is 0")
        XCTAssertFalse(rs.bool(forColumn: "t"), "'abc' as int is 0")
        XCTAssertEqual(rs.int(forColumn: "big"), 7, "sqlite3_column_int keeps the low 32 bits")
        XCTAssertEqual(rs.long(forColumn: "big"), (1 << 40) | 7)
        XCTAssertEqual(rs.int(forColumn: "tx"), 12)
        XCTAssertEqual(rs.data(forColumn: "t"), Data("abc".utf8))
        XCTAssertEqual(rs.string(forColumn: "big"), "1099511627783")
        XCTAssertEqual(rs.string(forColumn: "r"), "0.5")
        rs.close()
    }

    /// FMDB prepares only the first statement of the SQL it is given (the tail is ignored).
    func testExecuteUpdateRunsTheFirstStatementOnly() {
        XCTAssertTrue(db.executeUpdate("create table multi (a)"))
        XCTAssertTrue(db.executeUpdate("insert into multi values (1); insert into multi values (2)"))
        XCTAssertEqual(db.int(forQuery: "select count(*) from multi"), 1)
        XCTAssertEqual(db.int(forQuery: "select a from multi"), 1)
    }

    /// FMDB's defaults: errors logged, no crash, no trace, no statement cache, a 2-second busy retry.
    func testDefaultsMatchFMDB() {
        let fresh = FMDatabase()
        XCTAssertTrue(fresh.logsErrors)
        XCTAssertFalse(fresh.crashOnErrors)
        XCTAssertFalse(fresh.traceExecution)
        XCTAssertFalse(fresh.shouldCacheStatements)
        XCTAssertFalse(fresh.checkedOut)
        XCTAssertEqual(fresh.maxBusyRetryTimeInterval, 2)
        XCTAssertNil(fresh.databasePath)
        XCTAssertNil(fresh.databaseURL)
        XCTAssertFalse(fresh.isOpen)
        XCTAssertNil(fresh.sqliteHandle)
        XCTAssertTrue(fresh.open())
        XCTAssertTrue(fresh.isOpen)
        XCTAssertNotNil(fresh.sqliteHandle)
        fresh.close()
        XCTAssertFalse(fresh.isOpen)
        XCTAssertNil(fresh.sqliteHandle)
    }

    /// FMDB's `tableExists:` and `columnExists:inTableWithName:` compare names lowercased.
    func testTableAndColumnExistsIgnoreCase() {
        XCTAssertTrue(db.tableExists("TEST"))
        XCTAssertTrue(db.tableExists("Test"))
        XCTAssertTrue(db.columnExists("A", inTableWithName: "TEST"))
        XCTAssertTrue(db.columnExists("e", inTableWithName: "Test"))
        XCTAssertFalse(db.columnExists("f", inTableWithName: "test"))
        XCTAssertFalse(db.tableExists("tes"))
    }

    /// FMDB builds its name map column by column, so with duplicate names the last column wins,
    /// in `columnIndexForName:`, the getters and `resultDictionary`.
    func testDuplicateColumnNamesLastWins() throws {
        let rs = try XCTUnwrap(db.executeQuery("select 1 as a, 2 as A, 3 as b"))
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.columnIndex(forName: "a"), 1)
        XCTAssertEqual(rs.int(forColumn: "a"), 2)
        XCTAssertEqual(rs.columnNameToIndexMap, ["a": 1, "b": 2])
        XCTAssertEqual(rs.columnIndex(forName: "A"), 1)
        XCTAssertEqual(rs.columnIndex(forName: "B"), 2)
        XCTAssertEqual(rs.string(forColumn: "b"), "3")
        // resultDictionary keeps each column's own spelling, so both survive there
        let row = try XCTUnwrap(rs.resultDictionary)
        XCTAssertEqual(row["a"] as? NSNumber, 1)
        XCTAssertEqual(row["A"] as? NSNumber, 2)
        rs.close()
        let same = try XCTUnwrap(db.executeQuery("select 1 as x, 2 as x"))
        XCTAssertTrue(same.next())
        XCTAssertEqual(same.columnIndex(forName: "x"), 1)
        XCTAssertEqual(same.int(forColumn: "X"), 2)
        XCTAssertEqual(same.resultDictionary?["x"] as? NSNumber, 2)
        same.close()
    }

    /// FMDB's result set remembers its SQL and database until closed; its column count is the
    /// statement's, known before the first row; `resultDictionary` is nil with no current row.
    func testResultSetPropertiesBeforeAndAfterRows() throws {
        let sql = "select a, b, c from test where c <= ?"
        let rs = try XCTUnwrap(db.executeQuery(sql, 2))
        XCTAssertEqual(rs.query, sql)
        XCTAssertTrue(rs.parentDB === db)
        XCTAssertEqual(rs.columnCount, 3)
        XCTAssertNil(rs.resultDictionary, "no current row")
        XCTAssertFalse(rs.hasAnotherRow())
        XCTAssertTrue(db.hasOpenResultSets)
        XCTAssertTrue(rs.next())
        XCTAssertEqual(rs.resultDictionary?.count, 3)
        XCTAssertTrue(rs.next())
        XCTAssertFalse(rs.next())
        XCTAssertNil(rs.parentDB, "closed at the end, as FMDB's close sets parentDB to nil")
        XCTAssertFalse(db.hasOpenResultSets)

        // a reusable set from prepare: no current row after each bind, until next()
        let prepared = try XCTUnwrap(db.prepare("select ? as v"))
        for value in [1, 2] {
            XCTAssertTrue(prepared.bind(withArray: [value]))
            XCTAssertNil(prepared.resultDictionary)
            XCTAssertTrue(prepared.next())
            XCTAssertEqual(prepared.resultDictionary?["v"] as? NSNumber, NSNumber(value: value))
            XCTAssertFalse(prepared.next())
            XCTAssertNil(prepared.resultDictionary)
        }
        prepared.close()
    }

    /// FMDB's `executeQuery:` accepts any statement: a DDL or DML statement runs on the first `next`,
    /// which returns NO.
    func testExecuteQueryWithANonQueryRunsItOnNext() throws {
        let rs = try XCTUnwrap(db.executeQuery("create table madebyquery (a)"))
        XCTAssertFalse(db.tableExists("madebyquery"), "not run before next")
        XCTAssertFalse(rs.next())
        XCTAssertFalse(db.hadError())
        XCTAssertTrue(db.tableExists("madebyquery"))
        let insert = try XCTUnwrap(db.executeQuery("insert into madebyquery values (?)", 5))
        XCTAssertFalse(insert.next())
        XCTAssertEqual(db.changes, 1)
        XCTAssertEqual(db.int(forQuery: "select a from madebyquery"), 5)
    }

    /// FMDB binds an `NSNumber` made from a float as the float's exact double value (2.2f is
    /// 2.2000000476837158), not as its shortest decimal text.
    func testFloatBindsItsExactDoubleValue() {
        XCTAssertEqual(db.double(forQuery: "select e from test where c = 1"), Double(Float(2.2)))
        XCTAssertNotEqual(db.double(forQuery: "select e from test where c = 1"), 2.2)
    }

    /// FMDB 2.7's `isInTransaction` is `!sqlite3_get_autocommit`: it follows transactions begun and
    /// ended in SQL too, and a second `beginTransaction` fails without ending the first.
    func testIsInTransactionFollowsSQLite() {
        XCTAssertFalse(db.isInTransaction)
        XCTAssertTrue(db.executeUpdate("begin"))
        XCTAssertTrue(db.isInTransaction)
        XCTAssertFalse(db.beginTransaction(), "cannot start a transaction within a transaction")
        XCTAssertEqual(db.lastErrorCode(), SQLITE_ERROR)
        XCTAssertTrue(db.isInTransaction)
        XCTAssertTrue(db.executeUpdate("insert into test (a) values ('in sql transaction')"))
        XCTAssertTrue(db.rollback())
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(db.int(forQuery: "select count(*) from test"), 20)
        XCTAssertTrue(db.beginTransaction())
        XCTAssertTrue(db.isInTransaction)
        XCTAssertTrue(db.executeUpdate("commit"))
        XCTAssertFalse(db.isInTransaction)
    }

    /// With a date formatter set, FMDB's `dateForColumn` parses the column's text with it, so a number
    /// stored before the formatter was set no longer reads as a date; without one, `stringFromDate:` and
    /// `dateFromString:` answer nil.
    func testDateFormatterGovernsDateReads() throws {
        XCTAssertNil(db.string(from: Date(timeIntervalSince1970: 0)))
        XCTAssertNil(db.date(from: "1970-01-01 00:00:00"))
        XCTAssertNotNil(
            db.date(forQuery: "select d from test where c = 1"), "REAL seconds read as a date without a formatter")
        db.setDateFormat(FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss"))
        XCTAssertNil(
            db.date(forQuery: "select d from test where c = 1"), "a number is not text in the formatter's format")
        XCTAssertEqual(db.string(from: Date(timeIntervalSince1970: 0)), "1970-01-01 00:00:00")
        XCTAssertEqual(db.date(from: "1970-01-01 00:00:00"), Date(timeIntervalSince1970: 0))
        XCTAssertNil(db.date(from: "not a date"))
    }

    // MARK: - FMDatabasePool behaviours of FMDB's implementation

    /// FMDB's pool opens every connection with the pool's flags and VFS.
    func testPoolUsesItsFlags() throws {
        let pool = FMDatabasePool(path: databasePath, flags: SQLITE_OPEN_READONLY)
        XCTAssertEqual(pool.openFlags, SQLITE_OPEN_READONLY)
        XCTAssertEqual(pool.path, databasePath)
        var ran = false
        pool.inDatabase { db in
            ran = true
            XCTAssertEqual(db.int(forQuery: "select count(*) from test"), 20)
            XCTAssertFalse(db.executeUpdate("insert into test (a) values (?)", "no"))
            XCTAssertEqual(db.lastErrorCode(), SQLITE_READONLY)
        }
        XCTAssertTrue(ran)
        pool.releaseAllDatabases()
    }

    /// FMDB's pool marks a connection `checkedOut` while a block holds it, and clears the mark on check-in.
    func testPoolMarksConnectionsCheckedOut() throws {
        let pool = FMDatabasePool(path: databasePath)
        var held: FMDatabase?
        pool.inDatabase { db in
            held = db
            XCTAssertTrue(db.checkedOut)
            XCTAssertEqual(pool.countOfCheckedOutDatabases, 1)
        }
        let connection = try XCTUnwrap(held)
        XCTAssertFalse(connection.checkedOut)
        XCTAssertEqual(pool.countOfCheckedInDatabases, 1)
        pool.releaseAllDatabases()
    }

    /// FMDB hands `arguments:` to `sqlite3_create_function`: -1 takes any number, and `argc` is what
    /// the call passed; registering a name again replaces the function.
    func testCustomFunctionVariadicAndReplaced() {
        let db = self.db!
        db.makeFunctionNamed("ArgCount", arguments: -1) { context, argc, _ in
            db.resultInt(argc, context: context)
        }
        XCTAssertEqual(db.int(forQuery: "select ArgCount()"), 0)
        XCTAssertEqual(db.int(forQuery: "select ArgCount(1, 'two', x'03', null)"), 4)
        db.makeFunctionNamed("ArgCount", arguments: -1) { context, argc, _ in
            db.resultInt(argc * 10, context: context)
        }
        XCTAssertEqual(db.int(forQuery: "select ArgCount(1, 2)"), 20)
        XCTAssertFalse(db.hadError())
    }

    // MARK: - Version

    /// FMDB's testVersionNumber checks `FMDBVersion`; API.md names the string form instead.
    func testVersionNumber() {
        XCTAssertEqual(FMDatabase.fmdbUserVersion(), "2.7.12")
    }
}

/// What a custom function saw, read after the query (the function runs synchronously inside `next()`).
private final class ValuesSeen {
    var called = false
    var data: Data?
    var string: String?
    var int: Int32 = -1
    var long: Int64 = -1
    var double: Double = -1
}
