@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A pool's `replaceKeyProvider` against the other key changes: it waits for a rekey of the pool, checks
/// again when a rekey elsewhere in this process lands during its check, and announces the connection it
/// keeps to the pool's delegate.
final class ReplaceKeyProviderPoolTests: FMDBCipherTestCase {
    static func provider(_ byte: UInt8) throws -> RawKeyProvider { try KeyChangeCoordinationTests.provider(byte) }

    /// A WAL database under key byte 1 with a table `t`.
    func makeKeyed(_ name: String) throws -> String {
        let path = directory.path(name)
        let queue = try FMDatabaseQueue(path: path, keyProvider: Self.provider(1))
        try queue.inDatabase { db in
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode = wal"), "wal")
            try db.executeUpdate("create table t (v integer)", values: nil)
        }
        queue.close()
        return path
    }

    /// `prepareDatabase` that, once armed, signals `holding` and waits for `release` (at most 5 s).
    final class Hold: Sendable {
        let armed = Locked(false)
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)

        func prepare(_ db: FMDatabase) {
            guard
                armed.withLock({ armed in
                    defer { armed = false }; return armed
                })
            else { return }
            holding.signal()
            _ = release.wait(timeout: .now() + 5)
        }
    }

    /// The pool's own rekey runs (held in `prepareDatabase` of the connection it opens): a replacement asked
    /// for meanwhile waits for it, then checks its provider against the file as the rekey left it.
    func testAReplacementWaitsForTheRekeyOfThePool() throws {
        let path = try makeKeyed("waits.db")
        let hold = Hold()
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: Self.provider(1), logsErrors: false,
                prepareDatabase: { db in
                    hold.prepare(db)
                }))
        pool.releaseAllDatabases()  // The rekey opens its connection, through prepareDatabase.
        hold.armed.withLock { $0 = true }
        let rekeyError = Locked<String?>(nil)
        let rekeyed = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do { _ = try pool.rekey(using: Self.provider(2)) } catch { rekeyError.withLock { $0 = "\(error)" } }
            rekeyed.signal()
        }
        hold.holding.wait()  // The rekey has begun.
        let replaced = Locked<Int?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do {
                try pool.replaceKeyProvider(Self.provider(1))
                replaced.withLock { $0 = 0 }
            } catch {
                replaced.withLock { $0 = nsError(error).code }
            }
            finished.signal()
        }
        XCTAssertEqual(finished.wait(timeout: .now() + 0.5), .timedOut, "the replacement waits for the rekey")
        hold.release.signal()
        XCTAssertEqual(rekeyed.wait(timeout: .now() + 60), .success, "the rekey returned")
        XCTAssertEqual(finished.wait(timeout: .now() + 60), .success, "the replacement returned")
        XCTAssertNil(rekeyError.withLock { $0 })
        XCTAssertEqual(replaced.withLock { $0 }, 26, "checked after the rekey: key 1 no longer opens the file")
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0)
    }

    /// A rekey through another queue of the file lands while the replacement checks its provider (held in
    /// `prepareDatabase`): the replacement checks again, finds key 1 refused, and the pool keeps key 2.
    func testAReplacementChecksAgainWhenTheFileIsRekeyedElsewhereMeanwhile() throws {
        let path = try makeKeyed("again.db")
        let hold = Hold()
        let pool = try FMDatabasePool(
            path: path,
            configuration: FMDatabaseConfiguration(
                keyProvider: Self.provider(1), logsErrors: false,
                prepareDatabase: { db in
                    hold.prepare(db)
                }))
        let queue = try FMDatabaseQueue(
            path: path, configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
        hold.armed.withLock { $0 = true }
        let replaced = Locked<Int?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do {
                try pool.replaceKeyProvider(Self.provider(1))
                replaced.withLock { $0 = 0 }
            } catch {
                replaced.withLock { $0 = nsError(error).code }
            }
            finished.signal()
        }
        hold.holding.wait()  // Key 1 opened the file: the replacement's check passed.
        _ = try queue.rekey(using: Self.provider(2))
        hold.release.signal()
        XCTAssertEqual(finished.wait(timeout: .now() + 60), .success, "the replacement returned")
        XCTAssertEqual(replaced.withLock { $0 }, 26, "checked again: key 1 no longer opens the file")
        XCTAssertEqual(pool.inDatabase { db in db.int(forQuery: "select count(*) from t") }, 0, "the pool reads it")
    }

    final class Recorder: FMDatabasePoolDelegate {
        let added = Locked<[ObjectIdentifier]>([])
        func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {
            added.withLock { $0.append(ObjectIdentifier(database)) }
        }
    }

    /// The connection the replacement opened and keeps is announced before its first block.
    func testTheConnectionAReplacementKeepsIsAnnouncedToTheDelegate() throws {
        let pool = try FMDatabasePool(
            path: try makeKeyed("announce.db"),
            configuration: FMDatabaseConfiguration(keyProvider: Self.provider(1), logsErrors: false))
        let recorder = Recorder()
        pool.delegate = recorder
        pool.inDatabase { db in XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 0) }
        try pool.replaceKeyProvider(Self.provider(1))
        XCTAssertEqual(pool.countOfOpenDatabases, 1, "only the connection that checked the provider")
        var served: ObjectIdentifier?
        pool.inDatabase { db in served = ObjectIdentifier(db) }
        let added = recorder.added.withLock { $0 }
        XCTAssertEqual(added.count, 2, "the init's connection, then the replacement's")
        XCTAssertEqual(added.last, served, "told about the replacement's connection before its first block")
        _ = recorder
    }
}
