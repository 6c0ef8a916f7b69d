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
    func makeKeyed(_ name: String = "keyed.db") throws -> String {
        let path = directory.path(name)
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
        waitOutKeyCheckInterval()
    }

    /// Sleeps past the interval in which a connection that passed the key check is not checked again (twice
    /// the interval, for intervals up to 10 ms: the default is 1 ms), so the next block of a connection that
    /// was in use before a rekey elsewhere is checked first.
    static func waitOutKeyCheckInterval() {
        let interval = min(FMDatabase.keyCheckInterval.load(ordering: .relaxed), 10_000_000)  // 10 ms at most
        usleep(useconds_t(2 * interval / 1_000 + 1_000))
    }

    /// Runs `body` with the key check interval set to `nanoseconds`.
    func withKeyCheckInterval(_ nanoseconds: UInt64, _ body: () throws -> Void) rethrows {
        let before = FMDatabase.keyCheckInterval.exchange(nanoseconds, ordering: .relaxed)
        defer { FMDatabase.keyCheckInterval.store(before, ordering: .relaxed) }
        try body()
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
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: harness.makeProvider(), logsErrors: false, prepareDatabase: { try harness.prepare($0) }))
        pool.releaseAllDatabases()  // The next block needs a new connection: prepareDatabase runs.
        harness.armed.withLock { $0 = true }
        let runs = Locked(0)
        try pool.inTransaction(.immediate) { db in
            runs.withLock { $0 += 1 }
            try db.executeUpdate("insert into t values (1)", values: nil)
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1)

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
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 2)
    }

    /// An idle connection under an old key uses one BEGIN, and a second key change while the next BEGIN
    /// waits uses another: the transaction still begins on a third connection and runs its block once. The
    /// idle connection has `crashOnErrors` set: its BEGIN meeting another key is the pool's key check, not
    /// an error of the program's, so it does not stop the process.
    func testAPoolTransactionOutlastsAStaleConnectionAndAnotherKeyChange() throws {
        let path = try makeKeyed()
        let keyByte = Locked<UInt8>(1)
        let armed = Locked(false)
        let provider = try ReloadableKeyProvider { try Self.provider(keyByte.withLock { $0 }) }
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: provider, logsErrors: false,
                prepareDatabase: { _ in
                    guard
                        armed.withLock({ armed in
                            defer { armed = false }; return armed
                        })
                    else { return }
                    try Self.rekeyElsewhere(path, from: 2, to: 3)  // a second rotation, before this BEGIN
                    keyByte.withLock { $0 = 3 }
                }))
        pool.inDatabase { db in db.crashOnErrors = true }  // the idle connection, under key 1
        try Self.rekeyElsewhere(path, from: 1, to: 2)
        keyByte.withLock { $0 = 2 }
        armed.withLock { $0 = true }
        let runs = Locked(0)
        try pool.inTransaction(.immediate) { db in
            runs.withLock { $0 += 1 }
            try db.executeUpdate("insert into t values (1)", values: nil)
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        XCTAssertFalse(armed.withLock { $0 }, "the second key change happened")
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1)
    }

    func testAQueueTransactionWhoseBeginMeetsAKeyChangedElsewhereRunsOnceOnANewConnection() async throws {
        let path = try makeKeyed()
        let harness = Harness(path: path)
        let queue = try FMDatabaseQueue(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: harness.makeProvider(), logsErrors: false, prepareDatabase: { try harness.prepare($0) }))
        queue.close()  // The next call opens a new connection: prepareDatabase runs.
        harness.armed.withLock { $0 = true }
        let runs = Locked(0)
        try await queue.performTransaction(.immediate) { db in
            runs.withLock { $0 += 1 }
            try db.executeUpdate("insert into t values (1)", values: nil)
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1)
    }

    /// The key check decides by checking, whatever code the connection reports: a connection that reads the
    /// file passes; after a rekey elsewhere a fresh connection keyed as it was cannot read the file either, so
    /// the check says "another key", and keeps saying it however often it is asked (SQLCipher 4.7 and later
    /// then report code 7, not 26, for the connection's reads); a connection keyed with the new key passes.
    func testTheKeyCheckFindsAnotherKeyByCheckingAndKeepsItsAnswer() throws {
        let path = try makeKeyed("check.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: Self.provider(1))
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 0)
        XCTAssertNil(db.keyCheckFailure(), "the file reads under the connection's key")
        try Self.rekeyElsewhere(path, from: 1, to: 2)
        for attempt in 1...3 {
            guard case .anotherKey = db.keyCheckFailure() else {
                return XCTFail("attempt \(attempt): \(String(describing: db.keyCheckFailure()))")
            }
        }
        let fresh = FMDatabase(path: path)
        XCTAssertTrue(fresh.open())
        defer { fresh.close() }
        try fresh.setKey(using: Self.provider(2))
        XCTAssertNil(fresh.keyCheckFailure(), "a connection under the new key passes")
    }

    /// The claim that lets a queue or pool skip its key check before an immediate or exclusive transaction:
    /// on a connection that last read the file under the old key, BEGIN IMMEDIATE and BEGIN EXCLUSIVE fail
    /// with SQLITE_NOTADB (they read the header page under the connection's key), while BEGIN DEFERRED
    /// succeeds and only the first statement of its block fails. In WAL and rollback-journal mode. The first
    /// failed read is code 26 on every SQLCipher. What the same connection reports later depends on the
    /// running SQLCipher, so the test states only that it is an error a failed page read leaves: 26 again up
    /// to 4.6; from 4.7, which keeps a failed page read for the connection's life, code 7 (4.9.0), or 7 or
    /// 26 for a read and 8 (read-only) for a write (4.19.0, which hands the pager a zeroed page). The queue
    /// and pool replace such a connection whatever it reports (the tests below).
    func testAnImmediateOrExclusiveBeginReadsTheHeaderUnderTheConnectionsKeyAndADeferredOneDoesNot() throws {
        let laterCodes = [SQLITE_NOTADB, SQLITE_NOMEM, SQLITE_READONLY].map { Int($0) }
        for journalMode in ["wal", "delete"] {
            let path = directory.path("begin-\(journalMode).db")
            let setUp = FMDatabase(path: path)
            XCTAssertTrue(setUp.open())
            try setUp.setKey(using: Self.provider(1))
            XCTAssertEqual(setUp.string(forQuery: "pragma journal_mode = \(journalMode)"), journalMode)
            try setUp.executeUpdate("create table t (v integer)", values: nil)
            setUp.close()

            let db = FMDatabase(path: path)
            XCTAssertTrue(db.open())
            defer { db.close() }
            try db.setKey(using: Self.provider(1))
            XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 0)  // The header page is in its cache.
            try Self.rekeyElsewhere(path, from: 1, to: 2)

            var expected = [Int(SQLITE_NOTADB)]
            for kind in [FMDBTransactionKind.immediate, .exclusive] {
                XCTAssertThrowsError(try db.inTransaction(kind) { _ in XCTFail("\(kind): the block ran") }) {
                    XCTAssertTrue(expected.contains(nsError($0).code), "\(journalMode) \(kind): \(nsError($0))")
                }
                XCTAssertFalse(db.isInTransaction)
                expected = laterCodes
            }
            let runs = Locked(0)
            XCTAssertThrowsError(
                try db.inTransaction(.deferred) { db in
                    runs.withLock { $0 += 1 }
                    try db.executeUpdate("insert into t values (1)", values: nil)
                }
            ) { XCTAssertTrue(laterCodes.contains(nsError($0).code), "\(journalMode) deferred: \(nsError($0))") }
            XCTAssertEqual(runs.withLock { $0 }, 1, "\(journalMode): BEGIN DEFERRED read nothing, its block ran")
        }
    }

    /// A pool on "the key file" (`Harness.keyByte`) with an idle connection under key 1, after the file was
    /// rekeyed to key 2 by another connection and the key file updated, as an operator's script does.
    func makePoolWithAnIdleConnectionUnderTheOldKey(_ name: String) throws -> FMDatabasePool {
        let path = try makeKeyed(name)
        let harness = Harness(path: path)
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: harness.makeProvider(), logsErrors: false))
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
        XCTAssertEqual(pool.countOfCheckedInDatabases, 1)
        try Self.rekeyElsewhere(path, from: 1, to: 2)
        harness.keyByte.withLock { $0 = 2 }
        return pool
    }

    func testPoolImmediateAndExclusiveTransactionsMeetingAnIdleConnectionUnderTheOldKeyRunOnce() throws {
        for kind in [FMDBTransactionKind.immediate, .exclusive] {
            let pool = try makePoolWithAnIdleConnectionUnderTheOldKey("pool-\(kind).db")
            let runs = Locked(0)
            try pool.inTransaction(kind) { db in
                runs.withLock { $0 += 1 }
                try db.executeUpdate("insert into t values (1)", values: nil)
            }
            XCTAssertEqual(runs.withLock { $0 }, 1, "\(kind)")
            XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1, "\(kind)")
        }
        // The FMDB forms (inTransaction is exclusive).
        let forms: [(String, (FMDatabasePool, (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) -> Void)] = [
            ("inImmediateTransaction", { $0.inImmediateTransaction($1) }),
            ("inExclusiveTransaction", { $0.inExclusiveTransaction($1) }),
            ("inTransaction", { $0.inTransaction($1) }),
        ]
        for (name, form) in forms {
            let pool = try makePoolWithAnIdleConnectionUnderTheOldKey("pool-\(name).db")
            let runs = Locked(0)
            form(pool) { db, _ in
                runs.withLock { $0 += 1 }
                XCTAssertTrue(db.executeUpdate("insert into t values (1)"), name)
            }
            XCTAssertNil(pool.lastError, name)
            XCTAssertEqual(runs.withLock { $0 }, 1, name)
            XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1, name)
        }
    }

    func testPoolDeferredTransactionMeetingAnIdleConnectionUnderTheOldKeyRunsOnceOnANewConnection() throws {
        // A deferred BEGIN reads nothing: the connection is checked before it (RunningAService.md: no request
        // fails because of an idle connection under the old key).
        let pool = try makePoolWithAnIdleConnectionUnderTheOldKey("pool-deferred.db")
        let runs = Locked(0)
        try pool.inTransaction(.deferred) { db in
            runs.withLock { $0 += 1 }
            try db.executeUpdate("insert into t values (1)", values: nil)
        }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        pool.inDeferredTransaction { db, _ in
            runs.withLock { $0 += 1 }
            XCTAssertTrue(db.executeUpdate("insert into t values (2)"))
        }
        XCTAssertNil(pool.lastError)
        XCTAssertEqual(runs.withLock { $0 }, 2)
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 2)
    }

    /// A queue on "the key file" whose connection is open under key 1, after the file was rekeyed to key 2
    /// elsewhere and the key file updated.
    func makeQueueWithAConnectionUnderTheOldKey(_ name: String) throws -> FMDatabaseQueue {
        let path = try makeKeyed(name)
        let harness = Harness(path: path)
        let queue = try FMDatabaseQueue(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: harness.makeProvider(), logsErrors: false))
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
        try Self.rekeyElsewhere(path, from: 1, to: 2)
        harness.keyByte.withLock { $0 = 2 }
        return queue
    }

    func testQueueTransactionsMeetingAConnectionUnderTheOldKeyRunOnce() async throws {
        for kind in [FMDBTransactionKind.immediate, .exclusive, .deferred] {
            let queue = try makeQueueWithAConnectionUnderTheOldKey("queue-\(kind).db")
            let runs = Locked(0)
            try queue.inTransaction(kind) { db in
                runs.withLock { $0 += 1 }
                try db.executeUpdate("insert into t values (1)", values: nil)
            }
            try await queue.performTransaction(kind) { db in
                runs.withLock { $0 += 1 }
                try db.executeUpdate("insert into t values (2)", values: nil)
            }
            XCTAssertEqual(runs.withLock { $0 }, 2, "\(kind)")
            XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 2, "\(kind)")
        }
        let forms: [(String, (FMDatabaseQueue, (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) -> Void)] = [
            ("inImmediateTransaction", { $0.inImmediateTransaction($1) }),
            ("inExclusiveTransaction", { $0.inExclusiveTransaction($1) }),
            ("inTransaction", { $0.inTransaction($1) }),
            ("inDeferredTransaction", { $0.inDeferredTransaction($1) }),
        ]
        for (name, form) in forms {
            let queue = try makeQueueWithAConnectionUnderTheOldKey("queue-\(name).db")
            let runs = Locked(0)
            form(queue) { db, _ in
                runs.withLock { $0 += 1 }
                XCTAssertTrue(db.executeUpdate("insert into t values (1)"), name)
            }
            XCTAssertNil(queue.lastError, name)
            XCTAssertEqual(runs.withLock { $0 }, 1, name)
            XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 1, name)
        }
    }

    // MARK: - The key check interval

    /// A keyed pool and queue, with providers that read `harness`'s key byte, on a new WAL file under key 1;
    /// `body` runs with the key check interval set to `keyCheckInterval` nanoseconds.
    func withKeyedPoolAndQueue(
        keyCheckInterval: UInt64, _ body: (String, Harness, FMDatabasePool, FMDatabaseQueue) throws -> Void
    ) throws {
        let path = try makeKeyed()
        let harness = Harness(path: path)
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: harness.makeProvider(), logsErrors: false))
        let queue = try FMDatabaseQueue(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: harness.makeProvider(), logsErrors: false))
        try withKeyCheckInterval(keyCheckInterval) { try body(path, harness, pool, queue) }
    }

    /// A keyed pool and queue on a WAL file under key 1, each with a connection that passed the key check
    /// (so trusted for the interval, set to an hour here), then the file rekeyed elsewhere to key 2 (which
    /// the providers read on their next reload): `body` runs inside that hour.
    func withTrustedConnectionsOfARekeyedFile(_ body: (FMDatabasePool, FMDatabaseQueue) throws -> Void) throws {
        try withKeyedPoolAndQueue(keyCheckInterval: 3_600_000_000_000) { path, harness, pool, queue in
            XCTAssertEqual(try pool.inDatabase(Self.countRows), 0)
            XCTAssertEqual(try pool.inDatabase(Self.countRows), 0)  // Checked before: trusted from now on.
            XCTAssertEqual(try queue.inDatabase(Self.countRows), 0)
            XCTAssertEqual(try queue.inDatabase(Self.countRows), 0)
            let db = FMDatabase(path: path)
            XCTAssertTrue(db.open())
            try db.setKey(using: Self.provider(1))
            try db.rekeySafely(using: Self.provider(2))  // No wait: still inside the interval.
            db.close()
            harness.keyByte.withLock { $0 = 2 }
            try body(pool, queue)
        }
    }

    /// A connection that passed the key check less than the interval ago is not checked before its next
    /// block: a key change elsewhere in between is met by that block's first statement, which fails with
    /// code 26 like a block running at the change; the connection is replaced, and the next block is served.
    func testABlockWithinTheKeyCheckIntervalOfAKeyChangeFailsOnceAndTheNextIsServed() throws {
        try withTrustedConnectionsOfARekeyedFile { pool, queue in
            let reads: [(String, () throws -> Int32)] = [
                ("pool", { try pool.inDatabase(Self.countRows) }), ("queue", { try queue.inDatabase(Self.countRows) }),
            ]
            for (name, read) in reads {
                XCTAssertThrowsError(try read(), name) { error in
                    XCTAssertEqual(nsError(error).code, 26, name)
                    XCTAssertTrue(
                        (error as? FMDatabaseError)?.message.contains("rekeyed while this block ran") ?? false,
                        "\(name): \(error)")
                }
                XCTAssertEqual(try read(), 0, "\(name): the next block runs on a connection under the new key")
            }
        }
    }

    /// A block whose FMDB form hides the code 26 it met (a deferred transaction whose reads failed and whose
    /// COMMIT then succeeded, so its connection's last error is not code 26 at check-in) still makes the
    /// connection's next block check the key: one failed block, not one per block for the interval.
    func testABlockThatHidCode26LeavesItsConnectionToBeCheckedBeforeTheNextBlock() throws {
        try withTrustedConnectionsOfARekeyedFile { pool, queue in
            let met = Locked<[Int32]>([])
            pool.inDeferredTransaction { db, _ in
                XCTAssertFalse(db.executeQuery("select count(*) from t")?.next() ?? true)
                met.withLock { $0.append(db.lastErrorCode()) }
            }
            queue.inDeferredTransaction { db, _ in
                XCTAssertFalse(db.executeQuery("select count(*) from t")?.next() ?? true)
                met.withLock { $0.append(db.lastErrorCode()) }
            }
            XCTAssertEqual(met.withLock { $0 }.map { $0 & 0xFF }, [26, 26], "each block met the new key")
            XCTAssertEqual(try pool.inDatabase(Self.countRows), 0, "pool: checked, reopened and served")
            XCTAssertEqual(try queue.inDatabase(Self.countRows), 0, "queue: checked, reopened and served")
        }
    }

    /// Past the interval the connection is checked before the block: a key change elsewhere fails no block.
    func testABlockAfterTheKeyCheckIntervalIsCheckedAndServedAcrossAKeyChange() throws {
        try withKeyedPoolAndQueue(keyCheckInterval: 1_000_000) { path, harness, pool, queue in
            XCTAssertEqual(try pool.inDatabase(Self.countRows), 0)
            XCTAssertEqual(try queue.inDatabase(Self.countRows), 0)
            try Self.rekeyElsewhere(path, from: 1, to: 2)  // Waits out the interval.
            harness.keyByte.withLock { $0 = 2 }
            XCTAssertEqual(try pool.inDatabase(Self.countRows), 0)
            XCTAssertEqual(try queue.inDatabase(Self.countRows), 0)
        }
    }

    /// The rows of `t`, through the throwing forms.
    static func countRows(_ db: FMDatabase) throws -> Int32 {
        let rows = try db.executeQuery("select count(*) from t", values: nil)
        defer { rows.close() }
        guard try rows.nextWithError() else { throw FMDatabaseError.misuse("no row") }
        return rows.int(forColumnIndex: 0)
    }

    /// The skip itself: a connection that only served immediate and exclusive transactions never prepared
    /// the key check (its statement is cached on the connection from the first check on).
    func testNoKeyCheckRunsBeforeAnImmediateOrExclusiveTransaction() throws {
        let path = try makeKeyed()
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
        let queue = try FMDatabaseQueue(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
        let checkSQL = "PRAGMA schema_version"
        for kind in [FMDBTransactionKind.immediate, .exclusive, .immediate] {
            try pool.inTransaction(kind) { db in XCTAssertNil(db.statementCache.take(checkSQL), "pool \(kind)") }
            try queue.inTransaction(kind) { db in XCTAssertNil(db.statementCache.take(checkSQL), "queue \(kind)") }
        }
        try pool.inTransaction(.deferred) { db in XCTAssertNotNil(db.statementCache.take(checkSQL), "pool deferred") }
        try queue.inTransaction(.deferred) { db in XCTAssertNotNil(db.statementCache.take(checkSQL), "queue deferred") }
    }

    func testAQueuePerformTransactionStoppedByAKeyChangeElsewhereThrowsTheKeyChangedError() async throws {
        let path = try makeKeyed()
        let queue = try FMDatabaseQueue(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
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
        try await queue.replaceKeyProvider(Self.provider(2))
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
    }

    func testReplaceKeyProviderDuringAPoolRekeyLeavesThePoolOnTheKeyOfTheFile() throws {
        let path = try makeKeyed()
        // The replacement's check opens a connection under key 1 (valid then) and is held in
        // prepareDatabase while the rekey to key 2 is asked for; it is let go when the rekey returned, or
        // after a while (when the rekey waits for it, as it must).
        let holding = DispatchSemaphore(value: 0)
        let rekeyed = DispatchSemaphore(value: 0)
        let hold = Locked(false)
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: Self.provider(1), logsErrors: false,
                prepareDatabase: { _ in
                    guard
                        hold.withLock({ hold in
                            defer { hold = false }; return hold
                        })
                    else { return }
                    holding.signal()
                    _ = rekeyed.wait(timeout: .now() + 3)
                }))
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
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
        XCTAssertNil(replaced.withLock { $0 }, "the replacement was checked before the rekey began")
    }

    func testQueueReplaceKeyProviderMeetsARekeyThroughAPoolOfTheFile() throws {
        let path = try makeKeyed()
        // The replacement's check opens a connection under key 1 and is held in prepareDatabase while a pool
        // of this process rekeys the file to key 2 (and hands key 2 to the queue).
        let holding = DispatchSemaphore(value: 0)
        let rekeyed = DispatchSemaphore(value: 0)
        let hold = Locked(false)
        let queue = try FMDatabaseQueue(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: Self.provider(1), logsErrors: false,
                prepareDatabase: { _ in
                    guard
                        hold.withLock({ hold in
                            defer { hold = false }; return hold
                        })
                    else { return }
                    holding.signal()
                    rekeyed.wait()
                }))
        let pool = try FMDatabasePool(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
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
        XCTAssertEqual(queue.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
    }
}
