@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A real full disk and a real read-only filesystem (`SmallFilesystem`: root only; CI runs as root); the
/// tool's exit codes on them are `FullFilesystemToolTests`. `LeakTests.testDiskFullAndReadOnlyKeepWhatWasCommitted`
/// covers the same errors through SQLite's own limits everywhere.
final class FileSystemFaultTests: FMDBCipherTestCase {
    var filesystem: SmallFilesystem?

    override func setUpWithError() throws {
        try super.setUpWithError()
        filesystem = try SmallFilesystem()
    }

    override func tearDown() {
        filesystem?.unmount()
        super.tearDown()
    }

    func testFullDiskFailsCleanlyAndKeepsWhatWasCommitted() throws {
        let point = try XCTUnwrap(filesystem).path
        let path = point + "/full.db"
        let key = try RawKeyProvider(key: Data(repeating: 9, count: 32))
        for mode in ["delete", "wal"] {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: path + "-wal")
            try? FileManager.default.removeItem(atPath: path + "-shm")
            let db = FMDatabase(path: path)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            try db.setKey(using: key)
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode=\(mode)"), mode)
            XCTAssertTrue(db.executeUpdate("create table t (n integer, pad blob)"))
            var committed = 0
            var failure: Int32 = 0
            for n in 0..<1000 {
                if db.executeUpdate("insert into t values (?, randomblob(2000))", n) {
                    committed += 1
                } else {
                    failure = db.lastErrorCode()
                    break
                }
            }
            XCTAssertTrue(
                [SQLITE_FULL, SQLITE_IOERR].contains(failure), "\(mode): \(failure) \(db.lastErrorMessage())")
            XCTAssertGreaterThan(committed, 10, mode)
            db.close()
            let check = FMDatabase(path: path)
            XCTAssertTrue(check.open())
            try check.setKey(using: key)
            XCTAssertEqual(check.string(forQuery: "pragma integrity_check"), "ok", mode)
            XCTAssertEqual(
                check.int(forQuery: "select count(*) from t"), Int32(committed), "\(mode): nothing committed was lost")
            check.close()
        }
    }

    func testReadOnlyFilesystemRefusesWritesAndKeepsData() throws {
        let point = try XCTUnwrap(filesystem).path
        let path = point + "/ro.db"
        let key = try RawKeyProvider(key: Data(repeating: 3, count: 32))
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: key)
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
        db.close()
        XCTAssertTrue(try XCTUnwrap(filesystem).remountReadOnly())
        let readOnly = FMDatabase(path: path)
        readOnly.logsErrors = false
        XCTAssertTrue(readOnly.open())
        try readOnly.setKey(using: key)
        XCTAssertEqual(readOnly.int(forQuery: "select count(*) from t"), 1)
        XCTAssertFalse(readOnly.executeUpdate("insert into t values (2)"))
        XCTAssertTrue(
            [SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_IOERR].contains(readOnly.lastErrorCode()),
            readOnly.lastErrorMessage())
        XCTAssertEqual(readOnly.int(forQuery: "select count(*) from t"), 1)
        readOnly.close()
    }
}
