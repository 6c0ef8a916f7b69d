import FMDB
import Foundation
import TestSupport
import XCTest

/// Every public entry point survives hostile input with a clear error and no crash.
final class BadInputTests: FMDBTempDBTestCase {
    override class func populateDatabase(_ db: FMDatabase) {
        db.executeUpdate("create table t (a integer, b text)")
        db.executeUpdate("insert into t values (1, 'one')")
    }

    func testWrongBindCountsInEveryForm() throws {
        XCTAssertFalse(db.executeUpdate("insert into t values (?, ?)", 1))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_RANGE)
        XCTAssertFalse(db.executeUpdate("insert into t values (?, ?)", withArgumentsIn: [1, 2, 3]))
        XCTAssertNil(db.executeQuery("select * from t where a = ?"))
        XCTAssertNil(db.executeQuery("select * from t where a = ?", withArgumentsIn: [1, 2]))
        XCTAssertThrowsError(try db.executeQuery("select * from t where a = ?", values: [])) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_RANGE))
            XCTAssertEqual(nsError(error).domain, "FMDatabase")
        }
        XCTAssertThrowsError(try db.executeUpdate("insert into t values (?)", values: [1, 2]))
        XCTAssertFalse(db.executeUpdate("insert into t values (:a, :b)", withParameterDictionary: ["a": 1]))
        XCTAssertNil(db.executeQuery("select * from t where a = :a", withParameterDictionary: [:]))
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 1, "nothing was written")
        XCTAssertEqual(
            db.int(forQuery: "select count(*) from t where a = ?"), 0, "Additions with a wrong count return 0")
    }

    func testABindNameWithANULByteIsRefused() throws {
        // SQLite would read the name only up to the NUL: "a\0b" would bind :a.
        XCTAssertFalse(db.executeUpdate("insert into t values (:a, 'x')", withParameterDictionary: ["a\u{0}b": 2]))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertTrue(db.lastErrorMessage().contains("NUL"), db.lastErrorMessage())
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 1, "nothing was written")
    }

    func testInvalidSQL() {
        for sql in [
            "", "   ", "-- just a comment", "select * from", "select * from nosuchtable", "\u{0}select 1", "drop table",
        ] {
            XCTAssertFalse(db.executeUpdate(sql), sql)
            XCTAssertTrue(db.hadError(), sql)
            XCTAssertNil(db.executeQuery(sql), sql)
            XCTAssertNil(db.prepare(sql), sql)
        }
    }

    func testExecuteUpdateWithAQueryIsAnError() {
        XCTAssertFalse(db.executeUpdate("select * from t"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
    }

    func testClosedDatabaseEverywhere() throws {
        db.close()
        XCTAssertFalse(db.executeUpdate("insert into t values (1, 'x')"))
        XCTAssertTrue(db.hadError())
        XCTAssertNil(db.executeQuery("select 1"))
        XCTAssertThrowsError(try db.executeQuery("select 1", values: nil))
        XCTAssertFalse(db.executeStatements("select 1"))
        XCTAssertFalse(db.beginTransaction())
        XCTAssertThrowsError(try db.checkpoint(.passive))
        XCTAssertThrowsError(try db.validateSQL("select 1"))
        XCTAssertEqual(db.int(forQuery: "select 1"), 0)
        XCTAssertFalse(db.tableExists("t"))
        XCTAssertEqual(db.userVersion, 0)
        XCTAssertFalse(db.goodConnection)
        XCTAssertEqual(db.lastInsertRowId, 0)
        XCTAssertEqual(db.changes, 0)
        XCTAssertNil(db.sqliteHandle)
        XCTAssertFalse(db.setKey("key"))
        XCTAssertFalse(db.rekey("key"))
        XCTAssertNil(db.cipherVersion)
        db.makeFunctionNamed("f", arguments: 0) { _, _, _ in }
        XCTAssertTrue(db.hadError())
        XCTAssertTrue(db.close(), "closing twice is harmless")
    }

    func testNulBytesAndInvalidUTF8InValues() throws {
        let nasty = "x\u{0}y\u{0}"
        XCTAssertTrue(db.executeUpdate("insert into t values (?, ?)", 2, nasty))
        XCTAssertEqual(db.string(forQuery: "select b from t where a = 2"), nasty)
        XCTAssertTrue(db.executeUpdate("insert into t values (?, ?)", 3, Data([0xFF, 0xFE, 0x00])))
        XCTAssertEqual(db.data(forQuery: "select b from t where a = 3"), Data([0xFF, 0xFE, 0x00]))
        // Reading invalid UTF-8 bytes as text repairs them instead of trapping.
        XCTAssertNotNil(db.string(forQuery: "select b from t where a = 3"))
    }

    func testUnknownColumnNamesAndIndexes() throws {
        let rs = try XCTUnwrap(db.executeQuery("select * from t"))
        XCTAssertTrue(rs.next())
        for name in ["", "nope", "\u{0}", "a\u{0}", String(repeating: "x", count: 10_000)] {
            XCTAssertEqual(rs.columnIndex(forName: name), -1)
            XCTAssertNil(rs.object(forColumn: name))
            XCTAssertEqual(rs.int(forColumn: name), 0)
        }
        for index: Int32 in [-1, 2, Int32.max, Int32.min] {
            XCTAssertNil(rs.object(forColumnIndex: index))
            XCTAssertEqual(rs.longLongInt(forColumnIndex: index), 0)
            XCTAssertNil(rs.data(forColumnIndex: index))
            XCTAssertNil(rs.dataNoCopy(forColumnIndex: index))
            XCTAssertNil(rs.date(forColumnIndex: index))
            XCTAssertTrue(rs.columnIndexIsNull(index))
        }
    }

    func testHugeBlobIsTooBig() {
        XCTAssertEqual(db.limit(for: SQLITE_LIMIT_LENGTH, value: 1_000_000) > 0, true)
        let huge = Data(count: 2_000_000)
        XCTAssertFalse(db.executeUpdate("insert into t values (9, ?)", huge))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_TOOBIG)
        XCTAssertFalse(db.executeUpdate("insert into t values (9, ?)", String(repeating: "x", count: 2_000_000)))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_TOOBIG)
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 1)
    }

    func testPathThatIsADirectory() {
        let db = FMDatabase(path: directory.url.path)
        XCTAssertFalse(db.open())
        XCTAssertEqual(db.lastErrorCode(), SQLITE_CANTOPEN)
        XCTAssertTrue(db.lastErrorMessage().contains("directory"))
    }

    func testFileThatIsNotADatabase() throws {
        let path = directory.path("notes.txt")
        try Data(String(repeating: "this is not a database, just text. ", count: 100).utf8).write(
            to: URL(fileURLWithPath: path))
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open(), "SQLite opens lazily")
        XCTAssertNil(db.executeQuery("select * from sqlite_master"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_NOTADB)
        XCTAssertFalse(db.executeUpdate("create table x (a)"))
        XCTAssertFalse(db.goodConnection)
        db.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertTrue(bytes.contains(bytes: "this is not a database"), "the file is left as it was")
    }

    func testUnconvertibleValuesBindTheirDescription() {
        struct Custom: CustomStringConvertible { var description: String { "custom!" } }
        XCTAssertTrue(db.executeUpdate("insert into t values (?, ?)", 4, Custom()))
        XCTAssertEqual(db.string(forQuery: "select b from t where a = 4"), "custom!")
        XCTAssertTrue(db.executeUpdate("insert into t values (?, ?)", 5, [1, 2] as [Int]))
        XCTAssertEqual(db.string(forQuery: "select b from t where a = 5"), "[1, 2]")
        XCTAssertTrue(db.executeUpdate("insert into t values (?, ?)", 6, [UInt8]()))
        XCTAssertEqual(db.string(forQuery: "select typeof(b) from t where a = 6"), "blob")
    }

    func testInterpolatedFormatBindsInsteadOfPasting() {
        let hostile = "x'); drop table t; --"
        let missing: Int? = nil
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into t values (\(7), \(hostile))"))
        XCTAssertTrue(db.executeUpdate(withFormat: "insert into t values (\(missing), \("q"))"))
        XCTAssertEqual(db.string(forQuery: "select b from t where a = 7"), hostile)
        XCTAssertEqual(db.int(forQuery: "select count(*) from t where a is null"), 1)
        let rs = db.executeQuery(withFormat: "select b from t where a = \(7)")
        XCTAssertTrue(rs?.next() ?? false)
        XCTAssertEqual(rs?.string(forColumnIndex: 0), hostile)
        XCTAssertTrue(db.tableExists("t"))
    }
}

final class ErrorBridgingTests: XCTestCase {
    func testErrorsAreNSErrorsInDomainFMDatabase() {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        do {
            try db.executeUpdate("insert into missing values (?)", values: [1])
            XCTFail("should throw")
        } catch let error as NSError {
            XCTAssertEqual(error.domain, "FMDatabase")
            XCTAssertEqual(error.code, Int(SQLITE_ERROR))
            XCTAssertEqual(error.localizedDescription, "no such table: missing")
        } catch {
            XCTFail("catch let error as NSError must match, as on Apple platforms: \(error)")
        }
        let last = db.lastError() as NSError
        XCTAssertEqual(last.code, 1)
        XCTAssertEqual(last.domain, "FMDatabase")
        XCTAssertFalse(last.description.contains("1, "), "bound values are not described")
    }
}

/// Every time interval a caller can set (busy timeouts, the backup's busy waits, the pool's transaction
/// queue timeout) takes any Double: infinity, NaN, huge, negative and zero must neither trap nor wedge.
/// Infinity and huge values mean "wait as long as SQLite allows"; NaN, negatives and zero mean "do not wait".
final class TimeIntervalInputTests: FMDBCipherTestCase {
    static let hostile: [TimeInterval] = [.infinity, -.infinity, .nan, 1e300, -1e300, Double(Int.max), -1, 0, 1e-9]

    func testBusyTimeoutTakesAnyDouble() throws {
        let db = FMDatabase(path: directory.path("busy.db"))
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        for seconds in Self.hostile {
            db.maxBusyRetryTimeInterval = seconds
            XCTAssertTrue(db.executeUpdate("insert into t values (?)", seconds), "\(seconds)")
            // SQLite's own view, in milliseconds: the longest it takes for infinity and huge values,
            // none for NaN, negatives, zero and what rounds to 0 ms.
            let expected: Int32 = seconds > 1e-3 ? .max : 0
            XCTAssertEqual(db.int(forQuery: "PRAGMA busy_timeout"), expected, "\(seconds)")
            XCTAssertEqual(
                db.maxBusyRetryTimeInterval, seconds.isNaN ? 0 : seconds, "NaN reads back as 0, what it means")
        }
        db.maxBusyRetryTimeInterval = 2.5
        XCTAssertEqual(db.int(forQuery: "PRAGMA busy_timeout"), 2500)
        db.close()
        db.maxBusyRetryTimeInterval = .infinity
        XCTAssertTrue(db.open(), "a reopen applies the stored timeout")
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), Int32(Self.hostile.count))
        db.close()
    }

    /// rekeySafely sets the busy timeout it is given for its own work and puts the connection's back
    /// after, NaN included.
    func testRekeySafelyTakesAnyBusyTimeoutAndRestoresTheConnections() throws {
        let db = FMDatabase(path: directory.path("rekey.db"))
        XCTAssertTrue(db.open())
        try db.setKey(using: RawKeyProvider(key: Data(repeating: 1, count: 32)))
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        for (n, seconds) in [TimeInterval.nan, .infinity, -1, 0].enumerated() {
            db.maxBusyRetryTimeInterval = 2.5
            XCTAssertEqual(
                try db.rekeySafely(
                    using: RawKeyProvider(key: Data(repeating: UInt8(n + 2), count: 32)), busyTimeout: seconds),
                .done, "\(seconds)")
            XCTAssertEqual(db.maxBusyRetryTimeInterval, 2.5, "\(seconds)")
            XCTAssertEqual(db.int(forQuery: "PRAGMA busy_timeout"), 2500, "\(seconds)")
        }
        XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
        db.close()
    }

    func testBackupTakesAnyBusyTimeout() throws {
        let source = FMDatabase(path: directory.path("source.db"))
        XCTAssertTrue(source.open())
        XCTAssertTrue(source.executeUpdate("create table t (a)"))
        XCTAssertTrue(source.executeUpdate("insert into t values (42)"))
        for (n, seconds) in Self.hostile.enumerated() {
            let copy = FMDatabase(path: directory.path("copy-\(n).db"))
            XCTAssertTrue(copy.open())
            source.maxBusyRetryTimeInterval = seconds
            XCTAssertNoThrow(try source.backup(to: copy), "\(seconds)")
            XCTAssertEqual(copy.int(forQuery: "select a from t"), 42, "\(seconds)")
            copy.close()
        }
        source.close()
    }

    func testPoolTransactionQueueTimeoutTakesAnyDouble() throws {
        let pool = FMDatabasePool(path: directory.path("pool.db"))
        XCTAssertTrue(try pool.inDatabase { db in db.executeUpdate("create table t (a)") })
        for seconds in Self.hostile {
            pool.transactionQueueTimeout = seconds
            // A second transaction on another thread waits behind the first: for 0, NaN and negatives it
            // gives up at once with SQLITE_BUSY; for the rest it waits until the first one ends.
            let first = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0),
                done = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                pool.inTransaction { db, _ in
                    db.executeUpdate("insert into t values (1)")
                    first.signal()
                    release.wait()
                }
                done.signal()
            }
            defer { release.signal() }  // never leave the first transaction holding the gate
            XCTAssertEqual(first.wait(timeout: .now() + 30), .success, "\(seconds): the first transaction started")
            let waitsForever = seconds.isNaN ? false : seconds > 1
            let second = DispatchSemaphore(value: 0)
            let outcome = Locked<Error?>(nil)
            DispatchQueue.global().async {
                do {
                    try pool.inTransaction(.deferred) { db in
                        try db.executeUpdate("insert into t values (2)", values: nil)
                    }
                } catch {
                    outcome.withLock { $0 = error }
                }
                second.signal()
            }
            if waitsForever {
                XCTAssertEqual(second.wait(timeout: .now() + 0.3), .timedOut, "\(seconds): it waits its turn")
                release.signal()
                XCTAssertEqual(second.wait(timeout: .now() + 30), .success, "\(seconds)")
                XCTAssertNil(outcome.withLock { $0 }, "\(seconds)")
            } else {
                XCTAssertEqual(second.wait(timeout: .now() + 30), .success, "\(seconds): it gives up")
                release.signal()
                let error = outcome.withLock { $0 }
                // 1e-9 s may have got in before its deadline passed; the others must give up.
                if !(seconds > 0) || error != nil {
                    XCTAssertEqual(
                        (error as? FMDatabaseError)?.resultCode, SQLITE_BUSY, "\(seconds): \(String(describing: error))"
                    )
                }
            }
            XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "\(seconds)")
        }
        XCTAssertGreaterThan(try pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
        pool.releaseAllDatabases()
    }
}

/// SQL text is never cut short: SQLite reads SQL only up to a NUL byte, so every API that takes SQL text
/// refuses one (SQLITE_MISUSE, in domain FMDatabase) instead of running what comes before it and skipping
/// the rest.
final class NULInSQLTests: FMDBTempDBTestCase {
    override class func populateDatabase(_ db: FMDatabase) {
        db.executeUpdate("create table t (a integer, b text)")
        db.executeUpdate("insert into t values (1, 'one')")
    }

    /// The statement after the NUL would drop `t`; the one before it would create `x`.
    static let sql = "create table x (a)\u{0}; drop table t"
    static let script = "create table x (a);\u{0} drop table t"

    func assertRefused(_ error: (any Error)?, _ context: String, line: UInt = #line) {
        guard let error else { return XCTFail("\(context): not refused", line: line) }
        let ns = error as NSError
        XCTAssertEqual(ns.domain, "FMDatabase", context, line: line)
        XCTAssertEqual(ns.code, Int(SQLITE_MISUSE), "\(context): \(ns)", line: line)
        XCTAssertTrue(
            ns.localizedDescription.contains("NUL byte"), "\(context): \(ns.localizedDescription)", line: line)
    }

    func assertNothingRan(_ context: String, line: UInt = #line) {
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 1, "\(context): t is still there", line: line)
        XCTAssertFalse(db.tableExists("x"), "\(context): nothing before the NUL ran", line: line)
    }

    func testEveryFMDBEntryPointRefusesANULByte() throws {
        db.logsErrors = false
        XCTAssertFalse(db.executeUpdate(Self.sql))
        assertRefused(db.lastError(), "executeUpdate")
        XCTAssertFalse(db.executeUpdate(Self.sql, withArgumentsIn: []))
        assertRefused(db.lastError(), "executeUpdate(withArgumentsIn:)")
        XCTAssertNil(db.executeQuery("select 1\u{0}; drop table t"))
        assertRefused(db.lastError(), "executeQuery")
        XCTAssertNil(db.prepare("select 1\u{0}; drop table t"))
        assertRefused(db.lastError(), "prepare")
        XCTAssertFalse(db.executeStatements(Self.script))
        assertRefused(db.lastError(), "executeStatements")
        XCTAssertFalse(db.executeStatements(Self.script) { _ in 0 })
        assertRefused(db.lastError(), "executeStatements(withResultBlock:)")
        XCTAssertNil(db.string(forQuery: "select b from t\u{0} where a = 2"))
        assertRefused(db.lastError(), "string(forQuery:)")
        XCTAssertThrowsError(try db.executeUpdate(Self.sql, values: nil)) {
            assertRefused($0, "executeUpdate(values:)")
        }
        XCTAssertThrowsError(try db.executeQuery("select 1\u{0}", values: nil)) {
            assertRefused($0, "executeQuery(values:)")
        }
        XCTAssertThrowsError(try db.executeScript(Self.script) { _ in }) { assertRefused($0, "executeScript") }
        XCTAssertThrowsError(try db.execute(Self.sql)) { assertRefused($0, "execute") }
        XCTAssertThrowsError(try db.execute("insert into t values (?, 'x')\u{0}; drop table t", 2)) {
            assertRefused($0, "execute with a value")
        }
        XCTAssertThrowsError(try db.query("select 1\u{0}")) { assertRefused($0, "query") }
        XCTAssertThrowsError(try db.prepareStatement("select 1\u{0}")) { assertRefused($0, "prepareStatement") }
        XCTAssertThrowsError(try db.fetchAll(Int.self, "select a from t\u{0}")) { assertRefused($0, "fetchAll") }
        assertNothingRan("FMDatabase")
    }

    func testAMigrationStepWithANULByteIsRolledBack() throws {
        db.close()
        let queue = try XCTUnwrap(FMDatabaseQueue(path: databasePath))
        defer { queue.close() }
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("nul") { db in try db.execute(Self.sql) }
        XCTAssertThrowsError(try migrator.migrate(queue)) { assertRefused($0, "migration") }
        XCTAssertEqual(try migrator.appliedMigrations(queue), [])
        XCTAssertTrue(db.open())
        assertNothingRan("migration")
    }

    func testQueueAndPoolHelpersRefuseANULByte() throws {
        let queue = try XCTUnwrap(FMDatabaseQueue(path: databasePath))
        defer { queue.close() }
        queue.inDatabase { db in
            db.logsErrors = false
            XCTAssertFalse(db.executeStatements(Self.script))
            assertRefused(db.lastError(), "queue")
        }
        let pool = try XCTUnwrap(FMDatabasePool(path: databasePath))
        defer { pool.releaseAllDatabases() }
        pool.inDatabase { db in
            db.logsErrors = false
            XCTAssertFalse(db.executeUpdate(Self.sql))
            assertRefused(db.lastError(), "pool")
        }
        assertNothingRan("queue and pool")
    }

    func testANULByteAfterTheFirstStatementOfAScriptStopsItBeforeAnyRuns() throws {
        db.logsErrors = false
        var ran = 0
        XCTAssertThrowsError(try db.executeScript("select 1; select 2;\u{0} drop table t") { _ in ran += 1 }) {
            assertRefused($0, "executeScript")
        }
        XCTAssertEqual(ran, 0)
        assertNothingRan("executeScript")
    }

    func testTheErrorOfANULByteShowsNoKeyAndNoWholeScript() throws {
        db.logsErrors = false
        for sql in ["PRAGMA\u{0}key='swordfish'", "PRAGMA\u{0}key=swordfish", "select 1;\u{0} PRAGMA key = swordfish"] {
            XCTAssertFalse(db.executeUpdate(sql))
            let error = try XCTUnwrap(db.lastError() as? FMDatabaseError)
            assertRefused(error, sql)
            XCTAssertFalse("\(error) \(error.sql ?? "")".contains("swordfish"), "\(error)")
        }
        let long = "select 1;\u{0}" + String(repeating: "select 2;", count: 200_000)
        XCTAssertFalse(db.executeUpdate(long))
        let error = try XCTUnwrap(db.lastError() as? FMDatabaseError)
        XCTAssertLessThanOrEqual(error.sql?.count ?? 0, 1001)
        XCTAssertTrue(error.sql?.hasSuffix("…") == true)
    }

}
