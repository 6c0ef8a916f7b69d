import FMDB
import Foundation
import TestSupport
import XCTest

final class TransactionTests: FMDBTempDBTestCase {
    override class func populateDatabase(_ db: FMDatabase) {
        db.executeUpdate("create table t (a integer)")
    }

    private var count: Int32 { db.int(forQuery: "select count(*) from t") }

    func testAllFourTransactionKindsCommitAndRollBack() {
        for begin in [
            db.beginTransaction, db.beginDeferredTransaction, db.beginImmediateTransaction,
            db.beginExclusiveTransaction,
        ] {
            XCTAssertFalse(db.isInTransaction)
            XCTAssertTrue(begin())
            XCTAssertTrue(db.isInTransaction)
            XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
            XCTAssertTrue(db.rollback())
            XCTAssertFalse(db.isInTransaction)
        }
        XCTAssertEqual(count, 0)
        XCTAssertTrue(db.beginImmediateTransaction())
        db.executeUpdate("insert into t values (1)")
        XCTAssertTrue(db.commit())
        XCTAssertEqual(count, 1)
    }

    func testBeginTransactionIsExclusive() {
        XCTAssertTrue(db.beginTransaction())
        let other = FMDatabase(path: databasePath)
        XCTAssertTrue(other.open())
        other.maxBusyRetryTimeInterval = 0
        XCTAssertEqual(other.int(forQuery: "select count(*) from t"), 0)
        XCTAssertEqual(
            other.lastErrorCode(), SQLITE_BUSY, "an exclusive transaction keeps readers out (rollback journal)")
        db.commit()
        other.close()
    }

    func testCommitWithoutTransactionFails() {
        XCTAssertFalse(db.commit())
        XCTAssertTrue(db.hadError())
    }

    func testSavePoints() throws {
        try db.startSavePoint(withName: "outer")
        db.executeUpdate("insert into t values (1)")
        try db.startSavePoint(withName: "it's inner")
        db.executeUpdate("insert into t values (2)")
        try db.rollback(toSavePointWithName: "it's inner")
        try db.releaseSavePoint(withName: "it's inner")
        try db.releaseSavePoint(withName: "outer")
        XCTAssertEqual(count, 1)
        XCTAssertThrowsError(try db.releaseSavePoint(withName: "never started")) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_ERROR))
        }
    }

    func testInSavePointCommitsAndRollsBack() {
        XCTAssertNil(db.inSavePoint { _ in db.executeUpdate("insert into t values (1)") })
        XCTAssertEqual(count, 1)
        XCTAssertNil(
            db.inSavePoint { rollback in
                db.executeUpdate("insert into t values (2)")
                rollback.pointee = true
            })
        XCTAssertEqual(count, 1)
        XCTAssertFalse(db.isInTransaction, "the savepoint is released after a rollback")
    }

    func testNestedSavepointRollback() {
        let error = db.inSavePoint { _ in
            db.executeUpdate("insert into t values (1)")
            let inner = db.inSavePoint { rollback in
                db.executeUpdate("insert into t values (2)")
                rollback.pointee = true
            }
            XCTAssertNil(inner)
        }
        XCTAssertNil(error)
        XCTAssertEqual(db.int(forQuery: "select a from t"), 1)
        XCTAssertEqual(count, 1)
    }

    func testSavePointNamesArePerConnection() {
        let other = FMDatabase()
        XCTAssertTrue(other.open())
        // Interleaved savepoints on two connections each start from their own counter and succeed.
        XCTAssertNil(
            db.inSavePoint { _ in
                XCTAssertNil(other.inSavePoint { _ in other.executeUpdate("create table x (a)") })
            })
        XCTAssertTrue(other.tableExists("x"))
    }

    func testInSavePointOnClosedDatabaseReturnsError() {
        db.close()
        var ran = false
        let error = db.inSavePoint { _ in ran = true }
        XCTAssertNotNil(error)
        XCTAssertFalse(ran)
    }

    func testWALCheckpoint() throws {
        XCTAssertEqual(db.string(forQuery: "pragma journal_mode=wal"), "wal")
        for i in 0..<100 { db.executeUpdate("insert into t values (?)", i) }
        var logFrames: Int32 = -1
        var checkpointed: Int32 = -1
        try db.checkpoint(.passive, name: nil, logFrameCount: &logFrames, checkpointCount: &checkpointed)
        XCTAssertGreaterThan(logFrames, 0)
        XCTAssertEqual(logFrames, checkpointed)
        try db.checkpoint(.truncate)
        try db.checkpoint(.full, name: "main")
        let walSize = (try FileManager.default.attributesOfItem(atPath: databasePath + "-wal")[.size] as? NSNumber)?
            .intValue
        XCTAssertEqual(walSize, 0, "TRUNCATE empties the WAL")
        XCTAssertThrowsError(try db.checkpoint(.passive, name: "nosuchdb"))
    }

    func testLimits() {
        let original = db.limit(for: SQLITE_LIMIT_LENGTH, value: -1)
        XCTAssertGreaterThan(original, 0)
        XCTAssertEqual(db.limit(for: SQLITE_LIMIT_LENGTH, value: 1000), original)
        XCTAssertEqual(db.limit(for: SQLITE_LIMIT_LENGTH, value: -1), 1000)
    }

    func testInterrupt() {
        XCTAssertTrue(db.interrupt())
        db.close()
        XCTAssertFalse(db.interrupt())
    }
}
