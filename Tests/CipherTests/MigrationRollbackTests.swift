import FMDB
import Foundation
import TestSupport
import XCTest

/// A migration whose transaction SQLite rolled back after a failed statement is neither recorded nor
/// half-applied, even when the migration caught the failure and went on.
final class MigrationRollbackTests: FMDBCipherTestCase {
    private func provider() -> PassphraseKeyProvider { PassphraseKeyProvider("migration rollback") }

    private func migrator(_ trigger: TransactionRollbackTrigger, _ outcome: TransactionRollbackTrigger.Outcome)
        -> FMDatabaseMigrator
    {
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("schema") { db in
            guard db.executeStatements(TransactionRollbackTrigger.schema) else { throw db.lastError() }
        }
        migrator.registerMigration("fill") { db in trigger.runBlock(on: db, outcome) }
        return migrator
    }

    private func assertNotApplied(
        _ error: Error?, _ outcome: TransactionRollbackTrigger.Outcome, applied: [String], rows: Int32, _ label: String
    ) {
        XCTAssertEqual(
            (error as? FMDatabaseError)?.transactionWasRolledBack, true, "\(label): \(String(describing: error))")
        XCTAssertEqual(
            (error as? FMDatabaseError)?.resultCode, outcome.triggerCode, "the cause's code: \(label)")
        XCTAssertEqual(outcome.laterCode, 516, "the migration's later statement is refused: \(label)")
        XCTAssertEqual(applied, ["schema"], "the rolled-back migration is not recorded: \(label)")
        XCTAssertEqual(rows, 0, "none of its statements is committed: \(label)")
    }

    func testARolledBackMigrationIsNeitherRecordedNorHalfApplied() throws {
        for trigger in TransactionRollbackTrigger.allCases {
            let queuePath = directory.path("queue-\(trigger).db")
            let queue = try FMDatabaseQueue(path: queuePath, keyProvider: provider())
            let queueOutcome = TransactionRollbackTrigger.Outcome()
            let queueMigrator = migrator(trigger, queueOutcome)
            var queueError: Error?
            XCTAssertThrowsError(try queueMigrator.migrate(queue)) { queueError = $0 }
            assertNotApplied(
                queueError, queueOutcome, applied: try queueMigrator.appliedMigrations(queue),
                rows: try queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, "\(trigger), queue")
            queue.close()

            let poolPath = directory.path("pool-\(trigger).db")
            let pool = try FMDatabasePool(path: poolPath, keyProvider: provider())
            let poolOutcome = TransactionRollbackTrigger.Outcome()
            let poolMigrator = migrator(trigger, poolOutcome)
            var poolError: Error?
            XCTAssertThrowsError(try poolMigrator.migrate(pool)) { poolError = $0 }
            assertNotApplied(
                poolError, poolOutcome, applied: try poolMigrator.appliedMigrations(pool),
                rows: try pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, "\(trigger), pool")
            pool.releaseAllDatabases()
        }
    }
}
