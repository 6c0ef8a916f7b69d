import FMDB
import Foundation
import TestSupport
import XCTest

/// Every transaction form of queues and pools: once SQLite rolled the transaction back after a failed
/// statement, the block's later statements are refused, the form reports the rollback, and nothing of the
/// block is committed. (Named for the queue and pool test filters.)
final class FMDatabaseQueueRolledBackTransactionTests: FMDBCipherTestCase {
    /// A transaction form: runs `block` in it on a queue or pool at `path`, returns the error it reported
    /// (thrown, returned, or left in `lastError` by FMDB's forms).
    typealias Form = @Sendable (_ path: String, _ block: @escaping @Sendable (FMDatabase) -> Void) async -> Error?

    static func queueForm(
        _ body: @escaping @Sendable (FMDatabaseQueue, @escaping @Sendable (FMDatabase) -> Void) async -> Error?
    )
        -> Form
    {
        { path, block in
            guard
                let queue = try? FMDatabaseQueue(path: path, configuration: FMDatabaseConfiguration(logsErrors: false))
            else { return nil }
            defer { queue.close() }
            return await body(queue, block)
        }
    }

    static func poolForm(
        _ body: @escaping @Sendable (FMDatabasePool, @escaping @Sendable (FMDatabase) -> Void) async -> Error?
    )
        -> Form
    {
        { path, block in
            guard
                let pool = try? FMDatabasePool(
                    path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil,
                    configuration: FMDatabaseConfiguration(logsErrors: false))
            else { return nil }
            defer { pool.releaseAllDatabases() }
            return await body(pool, block)
        }
    }

    static let forms: [(String, Form)] = [
        (
            "queue.inTransaction",
            queueForm { q, b in
                q.inTransaction { db, _ in b(db) }; return q.lastError
            }
        ),
        (
            "queue.inDeferredTransaction",
            queueForm { q, b in
                q.inDeferredTransaction { db, _ in b(db) }; return q.lastError
            }
        ),
        (
            "queue.inExclusiveTransaction",
            queueForm { q, b in
                q.inExclusiveTransaction { db, _ in b(db) }; return q.lastError
            }
        ),
        (
            "queue.inImmediateTransaction",
            queueForm { q, b in
                q.inImmediateTransaction { db, _ in b(db) }; return q.lastError
            }
        ),
        ("queue.inSavePoint", queueForm { q, b in q.inSavePoint { db, _ in b(db) } }),
        ("queue.inTransaction(kind)", queueForm { q, b in Result { try q.inTransaction(.deferred, b) }.error }),
        (
            "queue.performTransaction",
            queueForm { q, b in await Result.async { try await q.performTransaction(.immediate, b) }.error }
        ),
        (
            "pool.inTransaction",
            poolForm { p, b in
                p.inTransaction { db, _ in b(db) }; return p.lastError
            }
        ),
        (
            "pool.inDeferredTransaction",
            poolForm { p, b in
                p.inDeferredTransaction { db, _ in b(db) }; return p.lastError
            }
        ),
        (
            "pool.inExclusiveTransaction",
            poolForm { p, b in
                p.inExclusiveTransaction { db, _ in b(db) }; return p.lastError
            }
        ),
        (
            "pool.inImmediateTransaction",
            poolForm { p, b in
                p.inImmediateTransaction { db, _ in b(db) }; return p.lastError
            }
        ),
        ("pool.inSavePoint", poolForm { p, b in p.inSavePoint { db, _ in b(db) } }),
        ("pool.inTransaction(kind)", poolForm { p, b in Result { try p.inTransaction(.exclusive, b) }.error }),
        (
            "pool.performTransaction",
            poolForm { p, b in await Result.async { try await p.performTransaction(.deferred, b) }.error }
        ),
    ]

    /// A database at a new path with the triggers' schema.
    private func makeDatabase(_ name: String) -> String {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeStatements(TransactionRollbackTrigger.schema))
        db.close()
        return path
    }

    private func committedRows(_ path: String) -> Int32 {
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        return db.int(forQuery: "select count(*) from t")
    }

    func testEveryFormReportsEveryRollbackAndCommitsNothing() async {
        var index = 0
        for (name, form) in Self.forms {
            for trigger in TransactionRollbackTrigger.allCases {
                index += 1
                let label = "\(trigger) in \(name)"
                let path = makeDatabase("form-\(index).db")
                let outcome = TransactionRollbackTrigger.Outcome()
                let error = await form(path) { db in trigger.runBlock(on: db, outcome) }
                XCTAssertEqual(outcome.triggerCode, trigger.code, label)
                XCTAssertFalse(outcome.inTransactionAfterTrigger, label)
                XCTAssertEqual(outcome.laterCode, 516, "the later statement is refused: \(label)")
                XCTAssertTrue(outcome.laterSaysRolledBack, label)
                let reported = error as? FMDatabaseError
                XCTAssertEqual(reported?.transactionWasRolledBack, true, "the form reports the rollback: \(label)")
                XCTAssertEqual(reported?.resultCode, trigger.code, label)
                XCTAssertEqual(committedRows(path), 0, "nothing of the block is committed: \(label)")
            }
        }
    }

    /// FMDB's block forms have nobody to throw to: they keep the error for `lastError` and log it as a failed
    /// transaction (not as a connection the queue could not supply).
    func testTheQueuesBlockFormLogsTheRollbackAsAFailedTransaction() throws {
        let path = makeDatabase("logged.db")
        let capture = LogCapture()
        let queue = try FMDatabaseQueue(path: path, configuration: FMDatabaseConfiguration(logger: capture.logger()))
        defer { queue.close() }
        queue.inTransaction { db, _ in TransactionRollbackTrigger.raiseRollback.runBlock(on: db, .init()) }
        XCTAssertEqual((queue.lastError as? FMDatabaseError)?.transactionWasRolledBack, true)
        let lines = capture.all.filter { $0.contains("FMDatabaseQueue transaction failed") }
        XCTAssertEqual(lines.count, 1, "\(capture.all)")
        XCTAssertTrue(lines.first?.contains("the transaction was rolled back") ?? false, "\(lines)")
        XCTAssertEqual(committedRows(path), 0)
    }

    /// The reported case: a cancelled `performTransaction` whose block goes on after its interrupted statement
    /// (a Bool form not looked at). The later statement is refused, and `CancellationError` means what it says.
    func testACancelledTransactionWhoseBlockGoesOnCommitsNothing() async throws {
        let path = makeDatabase("cancelled.db")
        let queue = try FMDatabaseQueue(path: path, configuration: FMDatabaseConfiguration(logsErrors: false))
        let pool = try FMDatabasePool(
            path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil,
            configuration: FMDatabaseConfiguration(logsErrors: false))
        defer {
            queue.close()
            pool.releaseAllDatabases()
        }
        let calls: [(String, @Sendable (@escaping @Sendable (FMDatabase) throws -> Int32) async throws -> Int32)] = [
            ("queue.performTransaction", { try await queue.performTransaction(.immediate, $0) }),
            ("pool.performTransaction", { try await pool.performTransaction(.immediate, $0) }),
        ]
        for (name, call) in calls {
            let between = Locked(false)
            let cancelled = Locked(false)
            let longInsertCode = Locked<Int32>(0)
            let laterCode = Locked<Int32>(0)
            let task = Task {
                try await call { db in
                    XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
                    between.withLock { $0 = true }
                    let patience = Date().addingTimeInterval(60)
                    while !cancelled.withLock({ $0 }), Date() < patience { Thread.sleep(forTimeInterval: 0.001) }
                    // Stopped by the cancellation (SQLite's progress handler): SQLite rolls the transaction back.
                    if !db.executeUpdate(
                        "insert into t with recursive n(x) as (select 1 union all select x + 1 from n"
                            + " where x < 30000000) select x from n")
                    {
                        longInsertCode.withLock { $0 = db.lastErrorCode() }
                    }
                    if !db.executeUpdate("insert into t values (3)") {
                        laterCode.withLock { $0 = db.lastExtendedErrorCode() }
                    }
                    return 0
                }
            }
            let patience = Date().addingTimeInterval(60)
            while !between.withLock({ $0 }), Date() < patience { try await Task.sleep(nanoseconds: 1_000_000) }
            task.cancel()
            cancelled.withLock { $0 = true }
            let result = await task.result
            XCTAssertTrue(result.error is CancellationError, "\(name): \(String(describing: result.error))")
            XCTAssertEqual(longInsertCode.withLock { $0 }, SQLITE_INTERRUPT, name)
            XCTAssertEqual(laterCode.withLock { $0 }, 516, "\(name): the statement after the interrupt is refused")
            XCTAssertEqual(committedRows(path), 0, "\(name): nothing was committed")
        }
    }
}

extension Result {
    /// The failure, or nil.
    fileprivate var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension Result where Failure == Error {
    fileprivate static func async(_ body: () async throws -> Success) async -> Result {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
}
