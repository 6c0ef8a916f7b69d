@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Key changes that meet each other: a transaction whose BEGIN meets a key changed elsewhere (its block has
/// not run: it begins again on a new connection), a queue's `performTransaction` stopped by one (the same
/// clear error as `perform`), and `replaceKeyProvider` while the pool rekeys (the pool ends on the key
/// the file is under).
final class KeyChangeCoordinationTests: FMDBCipherTestCase {
    static func provider(_ byte: UInt8) throws -> RawKeyProvider {
        try RawKeyProvider(key: Data(repeating: byte, count: 32))
    }

    /// A WAL database under key byte 1 with a table `t`.
    func makeKeyed() throws -> String {
        let path = directory.path("keyed.db")
        let queue = try FMDatabaseQueue(path: path, keyProvider: Self.provider(1))
        try queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        queue.close()
        return path
    }

    /// Another connection (not a queue or pool of this process) rekeys the file from key byte `old` to `new`.
    static func rekeyElsewhere(_ path: String, from old: UInt8, to new: UInt8) throws {
        let db = FMDatabase(path: path)
        guard db.open() else { throw db.lastError() }
        defer { db.close() }
        try db.setKey(using: provider(old))
        try db.rekeySafely(using: provider(new))
    }

    /// A provider that reads "the key file" (here a byte in memory) again at each reload, and a
    /// `prepareDatabase` that rekeys the file elsewhere once, when armed: between the new connection's key
    /// check and the BEGIN of the transaction that needed it.
    final class Harness: Sendable {
        let keyByte = Locked<UInt8>(1)
        let armed = Locked(false)
        let path: String

        init(path: String) { self.path = path }

        func makeProvider() throws -> ReloadableKeyProvider {
            try ReloadableKeyProvider { [keyByte] in try KeyChangeCoordinationTests.provider(keyByte.withLock { $0 }) }
        }

        func prepare(_ db: FMDatabase) throws {
            guard
                armed.withLock({ armed in
                    defer { armed = false }; return armed
                })
            else { return }
            try KeyChangeCoordinationTests.rekeyElsewhere(path, from: 1, to: 2)
            keyByte.withLock { $0 = 2 }  // The operator's new key file.
        }
    }

    func testAPoolTransactionWhoseBeginMeetsAKeyChangedElsewhereRunsOnceOnANewConnection() throws {
        let path = try makeKeyed()
        let harness = Harness(path: path)
        let pool = try FMDatabasePool(
            path: path, keyProvider: harness.makeProvider(), logsErrors: false,
            prepareDatabase: { try harness.prepare($0) })
        pool.releaseAllDatabases()  // The next block needs a new connection: prepareDatabase runs.
        harness.armed.withLock { $0 = true }
        let runs = Locked(0)
        try pool.inTransaction(.immediate) { db in
            runs.withLock { $0 += 1 }
            try db.executeUpdate("insert into t values (1)", values: nil)
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        XCTAssertEqual(try pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1)

        // The FMDB form too.
        pool.releaseAllDatabases()
        harness.armed.withLock { $0 = true }
        harness.keyByte.withLock { $0 = 1 }
        try Self.rekeyElsewhere(path, from: 2, to: 1)
        pool.inTransaction { db, _ in
            runs.withLock { $0 += 1 }
            db.executeUpdate("insert into t values (2)")
        }
        XCTAssertNil(pool.lastError)
        XCTAssertEqual(runs.withLock { $0 }, 2)
        XCTAssertEqual(try pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 2)
    }

    func testAQueueTransactionWhoseBeginMeetsAKeyChangedElsewhereRunsOnceOnANewConnection() async throws {
        let path = try makeKeyed()
        let harness = Harness(path: path)
        let queue = try FMDatabaseQueue(
            path: path, keyProvider: harness.makeProvider(), logsErrors: false,
            prepareDatabase: { try harness.prepare($0) })
        queue.close()  // The next call opens a new connection: prepareDatabase runs.
        harness.armed.withLock { $0 = true }
        let runs = Locked(0)
        try await queue.performTransaction(.immediate) { db in
            runs.withLock { $0 += 1 }
            try db.executeUpdate("insert into t values (1)", values: nil)
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        XCTAssertEqual(try queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1)
    }

    func testAQueuePerformTransactionStoppedByAKeyChangeElsewhereThrowsTheKeyChangedError() async throws {
        let path = try makeKeyed()
        let queue = try FMDatabaseQueue(path: path, keyProvider: Self.provider(1), logsErrors: false)
        let runs = Locked(0)
        do {
            try await queue.performTransaction(.deferred) { db in
                runs.withLock { $0 += 1 }
                try Self.rekeyElsewhere(path, from: 1, to: 2)
                try db.executeUpdate("insert into t values (1)", values: nil)
            }
            XCTFail("the block wrote under a key the file is not under")
        } catch {
            XCTAssertEqual(nsError(error).code, 26)
            XCTAssertTrue(
                (error as? FMDatabaseError)?.message.contains("rekeyed while this block ran") ?? false, "\(error)")
        }
        XCTAssertEqual(runs.withLock { $0 }, 1, "not run again")
        try queue.replaceKeyProvider(Self.provider(2))
        XCTAssertEqual(try queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
    }

    func testReplaceKeyProviderDuringAPoolRekeyLeavesThePoolOnTheKeyOfTheFile() throws {
        let path = try makeKeyed()
        // The replacement's check opens a connection under key 1 (valid then) and is held in
        // prepareDatabase while the rekey to key 2 is asked for; it is let go when the rekey returned, or
        // after a while (when the rekey waits for it, as it must).
        let holding = DispatchSemaphore(value: 0)
        let rekeyed = DispatchSemaphore(value: 0)
        let hold = Locked(false)
        let pool = try FMDatabasePool(path: path, keyProvider: Self.provider(1), logsErrors: false) { _ in
            guard
                hold.withLock({ hold in
                    defer { hold = false }; return hold
                })
            else { return }
            holding.signal()
            _ = rekeyed.wait(timeout: .now() + 3)
        }
        hold.withLock { $0 = true }
        let replaced = Locked<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do { try pool.replaceKeyProvider(Self.provider(1)) } catch { replaced.withLock { $0 = "\(error)" } }
            finished.signal()
        }
        holding.wait()
        try pool.rekey(using: Self.provider(2))
        rekeyed.signal()
        finished.wait()

        // Whatever the order, the pool keys new connections with a key that opens the file.
        pool.releaseAllDatabases()
        XCTAssertEqual(try pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
        XCTAssertNil(replaced.withLock { $0 }, "the replacement was checked before the rekey began")
    }

    func testQueueReplaceKeyProviderMeetsARekeyThroughAPoolOfTheFile() throws {
        let path = try makeKeyed()
        // The replacement's check opens a connection under key 1 and is held in prepareDatabase while a pool
        // of this process rekeys the file to key 2 (and hands key 2 to the queue).
        let holding = DispatchSemaphore(value: 0)
        let rekeyed = DispatchSemaphore(value: 0)
        let hold = Locked(false)
        let queue = try FMDatabaseQueue(path: path, keyProvider: Self.provider(1), logsErrors: false) { _ in
            guard
                hold.withLock({ hold in
                    defer { hold = false }; return hold
                })
            else { return }
            holding.signal()
            rekeyed.wait()
        }
        let pool = try FMDatabasePool(path: path, keyProvider: Self.provider(1), logsErrors: false)
        hold.withLock { $0 = true }
        let replaced = Locked<Int?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do {
                try queue.replaceKeyProvider(Self.provider(1))
                replaced.withLock { $0 = 0 }
            } catch {
                replaced.withLock { $0 = nsError(error).code }
            }
            finished.signal()
        }
        holding.wait()
        try pool.rekey(using: Self.provider(2))
        rekeyed.signal()
        finished.wait()

        XCTAssertEqual(replaced.withLock { $0 }, 26, "checked again: key 1 no longer opens the file")
        XCTAssertEqual(try queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
    }
}
