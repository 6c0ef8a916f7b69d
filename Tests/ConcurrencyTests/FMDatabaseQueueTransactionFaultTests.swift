import FMDB
import Foundation
import TestSupport
import XCTest

/// A real I/O error and a real full disk (the fault shim, in a child process) in the middle of a transaction
/// block, in every transaction form: SQLite rolls the transaction back, the block's later statement is
/// refused, the form reports the rollback, and nothing is committed. (Named for the queue and pool test
/// filters.)
final class FMDatabaseQueueTransactionFaultTests: FMDBCipherTestCase {
    static let forms = [
        "database.inTransaction", "database.inSavePoint",
        "queue.inTransaction", "queue.inDeferredTransaction", "queue.inExclusiveTransaction",
        "queue.inImmediateTransaction", "queue.inSavePoint", "queue.inTransaction(kind)", "queue.performTransaction",
        "pool.inTransaction", "pool.inDeferredTransaction", "pool.inExclusiveTransaction",
        "pool.inImmediateTransaction", "pool.inSavePoint", "pool.inTransaction(kind)", "pool.performTransaction",
        "migrator(queue)", "migrator(pool)",
    ]

    func testAnIOErrorOrAFullDiskInABlockCommitsNothing() throws {
        let helper = try builtHelper()
        let shim = try FaultShim.shared()
        var index = 0
        for (mode, code) in [("eio", SQLITE_IOERR), ("enospc", SQLITE_FULL)] {
            for form in Self.forms {
                index += 1
                let label = "\(mode) in \(form)"
                let folder = directory.path("fault-\(index)")
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                let resolved = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
                let path = resolved + "/test.db"
                let db = FMDatabase(path: path)
                XCTAssertTrue(db.open())
                XCTAssertTrue(db.executeStatements("create table t (a)"))
                db.close()
                var environment = ProcessInfo.processInfo.environment
                environment["LD_PRELOAD"] = shim.library
                environment["FMDB_FAULT_AT"] = "1"
                environment["FMDB_FAULT_MODE"] = mode
                environment["FMDB_FAULT_DIR"] = nil
                let result = try runProcess(
                    helper, ["transaction-fault", path, resolved, form], input: "", environment: environment)
                XCTAssertEqual(result.status, 0, "\(label): \(result.stderr)")
                let fields = Self.fields(result.stdout)
                XCTAssertEqual(fields["fault"], code, "the large row met the fault: \(label): \(result.stdout)")
                XCTAssertEqual(fields["later"], 516, "the later row is refused: \(label)")
                XCTAssertEqual(fields["rolledBack"], 1, "the form reports the rollback: \(label)")
                XCTAssertEqual(fields["rows"], 0, "nothing is committed: \(label)")
                XCTAssertNil(fields["recorded"], "the migration is not recorded: \(label)")
                if !form.hasPrefix("migrator") {
                    XCTAssertEqual((fields["reported"] ?? 0) & 0xFF, code, "the cause's code: \(label)")
                }
            }
        }
    }

    /// A fault at the form's COMMIT: SQLite rolls the transaction back, and the form says so.
    func testAnIOErrorOrAFullDiskAtCommitIsReportedAsARollback() throws {
        let helper = try builtHelper()
        let shim = try FaultShim.shared()
        var index = 0
        for (mode, code) in [("eio", SQLITE_IOERR), ("enospc", SQLITE_FULL)] {
            for form in [
                "database.inTransaction", "queue.inTransaction", "pool.inTransaction(kind)", "queue.performTransaction",
            ] {
                index += 1
                let label = "\(mode) at the COMMIT of \(form)"
                let folder = directory.path("commit-\(index)")
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                let resolved = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
                let path = resolved + "/test.db"
                let db = FMDatabase(path: path)
                XCTAssertTrue(db.open())
                XCTAssertTrue(db.executeStatements("create table t (a)"))
                db.close()
                var environment = ProcessInfo.processInfo.environment
                environment["LD_PRELOAD"] = shim.library
                environment["FMDB_FAULT_AT"] = "1"
                environment["FMDB_FAULT_MODE"] = mode
                environment["FMDB_FAULT_DIR"] = nil
                let result = try runProcess(
                    helper, ["transaction-fault", path, resolved, form, "commit"], input: "", environment: environment)
                XCTAssertEqual(result.status, 0, "\(label): \(result.stderr)")
                let fields = Self.fields(result.stdout)
                XCTAssertEqual(fields["later"], 0, "the block's rows went in: \(label): \(result.stdout)")
                XCTAssertEqual(fields["rolledBack"], 1, "the form reports the rollback: \(label): \(result.stdout)")
                XCTAssertEqual((fields["reported"] ?? 0) & 0xFF, code, "the COMMIT's code: \(label)")
                XCTAssertEqual(fields["rows"], 0, "nothing is committed: \(label)")
            }
        }
    }

    /// The helper's "name=number" fields.
    static func fields(_ output: String) -> [String: Int32] {
        var fields: [String: Int32] = [:]
        for field in output.split(whereSeparator: \.isWhitespace) {
            let parts = field.split(separator: "=")
            if parts.count == 2, let value = Int32(parts[1]) { fields[String(parts[0])] = value }
        }
        return fields
    }
}
