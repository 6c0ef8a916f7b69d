@testable import FMDB
import Foundation
import Logging
import TestSupport
import XCTest

/// A key-slot provider whose secret the slot file refuses (its slot was changed, then the data key rotated)
/// does not run its key derivation again for every request: once per slot file change.
final class KeySlotRefusalTests: FMDBCipherTestCase {
    /// A slotted database whose slot 1 (`alpha`) was changed to `gamma`, then whose data key was rotated: a
    /// provider for `alpha` that had unlocked it before both holds a data key that no longer opens it.
    func makeRefused(
        logger: Logger = Logger(label: "fmdb"), retryInterval: Duration = .zero
    ) throws -> (path: String, provider: KeySlotKeyProvider) {
        let path = path("refused.db")
        let kdf = KeySlotKDF.scrypt(n: KeySlotKDF.minimumScryptN)
        try KeySlots.createDatabase(at: path, secret: .passphrase("alpha"), kdf: kdf)
        let provider = KeySlotKeyProvider(
            secret: .passphrase("alpha"), logger: logger, refusalRetryInterval: retryInterval)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: provider)
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        db.close()
        try KeySlots.changeSlot(of: path, from: .passphrase("alpha"), to: .passphrase("gamma"), kdf: kdf)
        try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("gamma")])
        return (path, provider)
    }

    /// Opens `path` with `provider` and reads; the error, or nil when it opened.
    func open(_ path: String, _ provider: KeySlotKeyProvider) -> FMDatabaseError? {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open() else { return db.lastError() as? FMDatabaseError }
        defer { db.close() }
        do {
            try db.setKey(using: provider)
            return nil
        } catch {
            return error as? FMDatabaseError
        }
    }

    func testARefusedSecretRunsItsKeyDerivationOncePerSlotFileChangeAndIsLoggedOnce() throws {
        let log = LogCapture()
        let (path, provider) = try makeRefused(logger: log.logger())
        let meter = KeySlotWorkBudget.Meter()
        try KeySlotWorkBudget.$meter.withValue(meter) {
            for _ in 0..<20 {
                XCTAssertEqual(open(path, provider)?.resultCode, SQLITE_NOTADB)
            }
            XCTAssertLessThanOrEqual(meter.derivations, 1, "20 refused requests, one slot file")
            // A queue or pool reloads its provider after a failure: the refusal still holds for the same file.
            try provider.reloadKey()
            for _ in 0..<5 {
                XCTAssertEqual(open(path, provider)?.resultCode, SQLITE_NOTADB)
            }
            XCTAssertLessThanOrEqual(meter.derivations, 1, "reloaded, the same slot file")
            // The slot file changes (the operator gives the secret back): the next request tries again, and opens.
            try KeySlots.addSlot(
                to: path, unlockingWith: .passphrase("gamma"), newSecret: .passphrase("alpha"),
                kdf: .scrypt(n: KeySlotKDF.minimumScryptN))
            let before = meter.derivations
            XCTAssertNil(open(path, provider))
            XCTAssertLessThanOrEqual(meter.derivations - before, 2, "one unlock after the change")
        }
        let warnings = log.all.filter { $0.hasPrefix("warning") }
        XCTAssertEqual(warnings.count, 1, "\(log.all)")
        XCTAssertTrue(warnings.first?.contains(KeySlots.slotFilePath(forDatabaseAt: path)) == true, "\(warnings)")
        XCTAssertFalse(log.all.contains { $0.contains("alpha") || $0.contains("gamma") }, "no secret logged")
    }

    /// A slot file that keeps changing (an operator's script adding and removing slots) is unlocked again at
    /// once after its first change, then at most once per retry interval.
    func testASlotFileThatKeepsChangingIsTriedAtMostOncePerRetryInterval() throws {
        let (path, provider) = try makeRefused(retryInterval: .seconds(600))
        let kdf = KeySlotKDF.scrypt(n: KeySlotKDF.minimumScryptN)
        let meter = KeySlotWorkBudget.Meter()
        KeySlotWorkBudget.$meter.withValue(meter) {
            XCTAssertEqual(open(path, provider)?.resultCode, SQLITE_NOTADB)
        }
        let first = meter.derivations
        for round in 0..<5 {
            let added = try KeySlots.addSlot(
                to: path, unlockingWith: .passphrase("gamma"), newSecret: .passphrase("delta-\(round)"), kdf: kdf)
            KeySlotWorkBudget.$meter.withValue(meter) {
                XCTAssertEqual(open(path, provider)?.resultCode, SQLITE_NOTADB)
            }
            try KeySlots.removeSlot(added.id, from: path, unlockingWith: .passphrase("gamma"))
        }
        // The first change: its two passphrase slots tried once; the later four changes: none.
        XCTAssertEqual(meter.derivations - first, 2, "only the first change is unlocked within the interval")
    }

    /// The service's shape: a pool whose connections were open when the data key rotated.
    func testAPoolWhoseSecretIsRefusedRunsTheKeyDerivationOncePerSlotFileChange() throws {
        let path = path("pool.db")
        let kdf = KeySlotKDF.scrypt(n: KeySlotKDF.minimumScryptN)
        try KeySlots.createDatabase(at: path, secret: .passphrase("alpha"), kdf: kdf)
        let provider = KeySlotKeyProvider(secret: .passphrase("alpha"))
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: provider, logger: LogCapture().logger()))
        pool.inDatabase { db in XCTAssertTrue(db.executeUpdate("create table t (a)")) }
        try KeySlots.changeSlot(of: path, from: .passphrase("alpha"), to: .passphrase("gamma"), kdf: kdf)
        pool.inDatabase { db in XCTAssertTrue(db.executeUpdate("insert into t values (1)")) }
        try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("gamma")])
        let meter = KeySlotWorkBudget.Meter()
        KeySlotWorkBudget.$meter.withValue(meter) {
            for _ in 0..<30 {
                // No connection to give: the block does not run.
                pool.inDatabase { db in XCTAssertFalse(db.executeUpdate("insert into t values (2)")) }
            }
        }
        pool.releaseAllDatabases()
        XCTAssertLessThanOrEqual(meter.derivations, 1, "30 refused requests, one slot file")
    }
}
