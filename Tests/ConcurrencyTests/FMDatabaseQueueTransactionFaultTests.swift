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
                let fields = Dictionary(
                    uniqueKeysWithValues: result.stdout.split(whereSeparator: \.isWhitespace).compactMap {
                        field -> (String, Int32)? in
                        let parts = field.split(separator: "=")
                        guard parts.count == 2, let value = Int32(parts[1]) else { return nil }
                        return (String(parts[0]), value)
                    })
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
}
