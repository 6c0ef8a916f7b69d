@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A real full disk and a real read-only filesystem: a 256 KiB tmpfs mounted for the test (root only;
/// CI runs as root). `LeakTests.testDiskFullAndReadOnlyKeepWhatWasCommitted` covers the same errors
/// through SQLite's own limits everywhere.
final class FileSystemFaultTests: FMDBCipherTestCase {
    var mountPoint: String?

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard getuid() == 0, let mount = which("mount") else {
            throw XCTSkip("needs root to mount a size-limited tmpfs")
        }
        let point = FileManager.default.temporaryDirectory.appendingPathComponent("fmdb-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
        let result = try runProcess(mount, ["-t", "tmpfs", "-o", "size=256k", "tmpfs", point])
        guard result.status == 0 else {
            try? FileManager.default.removeItem(atPath: point)
            throw XCTSkip("mount refused: \(result.stderr)")
        }
        mountPoint = point
    }

    override func tearDown() {
        if let mountPoint, let umount = which("umount") {
            _ = try? runProcess(umount, [mountPoint])
            try? FileManager.default.removeItem(atPath: mountPoint)
        }
        super.tearDown()
    }

    func testFullDiskFailsCleanlyAndKeepsWhatWasCommitted() throws {
        let point = try XCTUnwrap(mountPoint)
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
        let point = try XCTUnwrap(mountPoint)
        let path = point + "/ro.db"
        let key = try RawKeyProvider(key: Data(repeating: 3, count: 32))
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: key)
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
        db.close()
        let mount = try XCTUnwrap(which("mount"))
        XCTAssertEqual(try runProcess(mount, ["-o", "remount,ro", point]).status, 0)
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

    func testToolExitCodesOnAReadOnlyAndAFullFilesystem() throws {
        let point = try XCTUnwrap(mountPoint)
        let tool = try builtTool()
        let environment = ProcessInfo.processInfo.environment.merging(["K": "k", "N": "n"]) { _, new in new }
        // A source too big for the 256 KiB filesystem: encrypting it there fills the disk.
        let outside = try TemporaryDirectory("fmdb-full-src")
        let source = outside.path("big.db")
        let big = FMDatabase(path: source)
        XCTAssertTrue(big.open())
        XCTAssertTrue(big.executeUpdate("create table t (pad blob)"))
        XCTAssertTrue(
            big.executeStatements(
                "with recursive c(x) as (select 1 union all select x + 1 from c limit 400) insert into t select randomblob(2000) from c"
            ))
        big.close()
        let full = try runProcess(
            tool, ["encrypt", source, point + "/big-enc.db", "--key-env", "K", "--quiet"], environment: environment)
        XCTAssertEqual(full.status, 74, "disk full is exit 74: \(full.stderr)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: point)
        XCTAssertEqual(leftovers, [], "no half file and no temporary file left on the full disk")

        let small = point + "/small.db"
        XCTAssertEqual(
            try runProcess(
                tool, ["sql", small, "create table t (a); insert into t values (1)", "--key-env", "K", "--create"],
                environment: environment
            ).status, 0)
        let mount = try XCTUnwrap(which("mount"))
        XCTAssertEqual(try runProcess(mount, ["-o", "remount,ro", point]).status, 0)
        let readOnly = try runProcess(
            tool, ["rekey", small, "--key-env", "K", "--new-key-env", "N", "--quiet"], environment: environment)
        XCTAssertEqual(readOnly.status, 74, "a read-only filesystem is exit 74: \(readOnly.stderr)")
        let check = try runProcess(tool, ["check", small, "--key-env", "K"], environment: environment)
        XCTAssertEqual(check.status, 0, "still opens with the old key: \(check.stderr)")
    }
}
