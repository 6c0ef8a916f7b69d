import FMDB
import FMDBService
import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import XCTest

/// `run()` under a real `ServiceGroup`: start, serve, graceful shutdown, drain, close; start errors.
final class ServiceLifecycleTests: FMDBCipherTestCase {
    private func service(
        _ path: String, key byte: UInt8, drainTimeout: Duration = .seconds(10), maximum: Int = 0
    ) -> FMDatabaseService {
        var configuration = FMDatabaseConfiguration()
        configuration.maximumNumberOfDatabasesToCreate = maximum
        let options = FMDatabaseServiceOptions(drainTimeout: drainTimeout, reloadsKeyOnSIGHUP: false)
        return FMDatabaseService(path: path, configuration: configuration, options: options) {
            try rawProvider(byte)
        }
    }

    func testRunServesUntilGracefulShutdownThenClosesEveryConnection() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 1)
        let pool = Locked<FMDatabasePool?>(nil)
        try await runGroup(service) {
            // Several calls at once open several connections.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await service.performTransaction { db in
                            try db.execute("INSERT INTO t (v) VALUES (?)", "row \(index)")
                        }
                        _ = try await service.perform { db in
                            usleep(20_000)  // Keeps the connection busy, so others open.
                            return db.int(forQuery: "SELECT count(*) FROM t")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let open = try await service.withPool { pool in pool.countOfOpenDatabases }
            XCTAssertGreaterThan(open, 1, "the calls ran on several connections")
            try await service.withPool { serving in pool.withLock { $0 = serving } }
            XCTAssertEqual(service.statistics.phase, .running)
        }
        let closed = try XCTUnwrap(pool.withLock { $0 })
        XCTAssertEqual(closed.countOfOpenDatabases, 0, "every connection is closed when run() returns")
        XCTAssertEqual(service.statistics.phase, .stopped)
        XCTAssertEqual(service.statistics.pool.openConnections, 0)
        XCTAssertEqual(service.statistics.callsInFlight, 0)
        let rows = try FMDatabaseQueue(path: path, keyProvider: rawProvider(1)).inDatabase { db in
            db.int(forQuery: "SELECT count(*) FROM t")
        }
        XCTAssertEqual(rows, 9, "every acknowledged write is in the file")
    }

    func testShutdownWaitsForARunningBlock() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 1)
        let finished = Locked(false)
        try await runGroup(service) {
            let started = Locked(false)
            Task {
                try await service.performTransaction { db in
                    started.withLock { $0 = true }
                    usleep(300_000)
                    try db.execute("INSERT INTO t (v) VALUES ('late')")
                    finished.withLock { $0 = true }
                }
            }
            await eventually("the block started") { started.withLock { $0 } }
            // The driver returns now: graceful shutdown begins while the block runs.
        }
        XCTAssertTrue(finished.withLock { $0 }, "run() returned only after the running block ended")
        XCTAssertEqual(service.statistics.callsInFlight, 0, "and after its call ended")
        let rows = try FMDatabaseQueue(path: path, keyProvider: rawProvider(1)).inDatabase { db in
            db.int(forQuery: "SELECT count(*) FROM t WHERE v = 'late'")
        }
        XCTAssertEqual(rows, 1, "the running block committed")
    }

    func testDrainTimeoutInterruptsABlockThatRunsOn() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 1, drainTimeout: .milliseconds(200))
        let outcome = Locked<(any Error)?>(nil)
        let started = ContinuousClock.now
        try await runGroup(service) {
            let running = Locked(false)
            Task {
                do {
                    _ = try await service.perform { db -> Int in
                        running.withLock { $0 = true }
                        // Runs for minutes unless interrupted.
                        let sql = """
                            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) \
                            SELECT count(*) FROM c
                            """
                        let rows = try db.executeQuery(sql, values: nil)
                        defer { rows.close() }
                        _ = try rows.nextWithError()
                        return rows.long(forColumnIndex: 0)
                    }
                } catch {
                    outcome.withLock { $0 = error }
                }
            }
            await eventually("the block runs") { running.withLock { $0 } }
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(30), "run() did not wait for the block to end")
        await eventually("the interrupted call returned") { outcome.withLock { $0 } != nil }
        let error = try XCTUnwrap(outcome.withLock { $0 })
        // Cancelled as its task would be: the statement fails with SQLITE_INTERRUPT inside the block, and the
        // call throws CancellationError.
        XCTAssertTrue(error is CancellationError, "\(error)")
        XCTAssertEqual(FMErrorDisposition(error), .cancelled)
        XCTAssertEqual(service.statistics.callsInterrupted, 1)
    }

    func testWrongKeyFailsRunWithCode26AndFailsWaitingCalls() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 2)
        let waiting = Task { try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") } }
        do {
            try await service.run()
            XCTFail("run() opened the database with a wrong key")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "\(error)")
            let text = "\(error)"
            XCTAssertTrue(text.contains("app.db"), "the error names the file: \(text)")
            XCTAssertFalse(text.lowercased().contains(hexKey(2)), "the error holds no key")
        }
        do {
            _ = try await waiting.value
            XCTFail("a call made before run() succeeded although the database never opened")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "the waiting call gets run()'s error: \(error)")
        }
        XCTAssertEqual(service.statistics.phase, .failed)
    }

    func testWrongKeyFailsTheServiceGroup() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 2)
        let group = ServiceGroup(services: [service], logger: Logger(label: "fmdb-service-test"))
        do {
            try await group.run()
            XCTFail("the group ran with a service whose database does not open")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "the group reports run()'s error: \(error)")
        }
    }

    func testMissingDatabaseFailsRunAndCreatesNothing() async throws {
        let path = path("missing.db")
        let service = service(path, key: 1)
        do {
            try await service.run()
            XCTFail("run() served a database that does not exist")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_CANTOPEN, "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "no empty database was created")
    }

    func testCreatesMissingDatabaseWhenAsked() async throws {
        let path = path("new.db")
        var options = FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        options.createsMissingDatabase = true
        let service = FMDatabaseService(path: path, options: options) { try rawProvider(1) }
        try await runGroup(service) {
            try await service.perform { db in try db.execute("CREATE TABLE n (x)") }
        }
        let tables = try FMDatabaseQueue(path: path, keyProvider: rawProvider(1)).inDatabase { db in
            db.int(forQuery: "SELECT count(*) FROM sqlite_master WHERE name = 'n'")
        }
        XCTAssertEqual(tables, 1)
    }

    func testMissingCredentialFailsRun() async throws {
        let path = try makeServiceDatabase(key: 1)
        let credentials = self.path("credentials")
        try FileManager.default.createDirectory(
            atPath: credentials, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let service = FMDatabaseService(
            path: path, systemdCredential: "app-db-key", holding: .rawKey,
            environment: ["CREDENTIALS_DIRECTORY": credentials],
            options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false))
        do {
            try await service.run()
            XCTFail("run() started without its credential")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_CANTOPEN, "\(error)")
            XCTAssertFalse("\(error)".contains("app-db-key"), "the credential's name is not repeated")
        }
    }

    func testCredentialOpensTheDatabase() async throws {
        let path = try makeServiceDatabase(key: 1)
        let credentials = self.path("credentials")
        try FileManager.default.createDirectory(
            atPath: credentials, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: credentials + "/app-db-key", contents: rawKey(1), attributes: [.posixPermissions: 0o400]))
        let service = FMDatabaseService(
            path: path, systemdCredential: "app-db-key", holding: .rawKey,
            environment: ["CREDENTIALS_DIRECTORY": credentials],
            options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false))
        try await runGroup(service) {
            let rows = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(rows, 1)
        }
    }

    func testCallsBeforeOpenWaitForIt() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 1)
        let early = Task { try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") } }
        await eventually("the early call waits") { service.statistics.phase == .notStarted }
        try? await Task.sleep(for: .milliseconds(50))
        XCTAssertEqual(service.statistics.calls, 0, "the early call has not ended before run()")
        try await runGroup(service) {
            let rows = try await early.value
            XCTAssertEqual(rows, 1, "the call made before run() ran once the pool opened")
        }
    }

    func testACancelledWaitingCallStopsWaiting() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 1)
        let early = Task { try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") } }
        try? await Task.sleep(for: .milliseconds(20))
        early.cancel()
        do {
            _ = try await early.value
            XCTFail("a cancelled call waiting for run() went on")
        } catch {
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
        XCTAssertEqual(service.statistics.failedCalls[.cancelled], 1)
    }

    func testCallsAfterShutdownFail() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = service(path, key: 1)
        try await runGroup(service) {
            _ = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
        }
        do {
            _ = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTFail("a call after shutdown ran")
        } catch let error as FMDatabaseServiceError {
            XCTAssertEqual(error.code, .shutDown)
            XCTAssertEqual(FMErrorDisposition(error), .permanent)
            XCTAssertTrue(error.description.contains("app.db"), error.description)
        }
        do {
            try await service.run()
            XCTFail("a stopped service ran again")
        } catch let error as FMDatabaseServiceError {
            XCTAssertEqual(error.code, .alreadyRunning)
        }
    }
}

/// `run()` outside a service group: cancelling its task stops it, as a graceful shutdown does but without
/// waiting for running calls.
final class ServiceCancellationTests: FMDBCipherTestCase {
    func testCancellingRunClosesThePool() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = FMDatabaseService(
            path: path, options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        ) { try rawProvider(1) }
        XCTAssertTrue(service.description.contains("app.db"), service.description)
        let running = Task { try await service.run() }
        let pool = try await service.withPool { $0 }
        _ = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(service.statistics.phase, .running)
        running.cancel()
        try await running.value
        XCTAssertEqual(service.statistics.phase, .stopped)
        XCTAssertEqual(pool.countOfOpenDatabases, 0)
        do {
            _ = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTFail("a call after run() ended ran")
        } catch let error as FMDatabaseServiceError {
            XCTAssertEqual(error.code, .shutDown)
        }
    }
}

/// `afterOpening`: migrations before the first call; a failed one fails `run()`.
final class ServiceSetUpTests: FMDBCipherTestCase {
    func testMigrationsRunBeforeTheFirstCall() async throws {
        let path = try makeServiceDatabase(key: 1)
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("createNotes") { db in
            usleep(50_000)  // A call made meanwhile must wait for it.
            try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        }
        let frozen = migrator
        var options = FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        options.afterOpening = { pool in try frozen.migrate(pool) }
        let service = FMDatabaseService(path: path, options: options) { try rawProvider(1) }
        let early = Task { try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM notes") } }
        try await runGroup(service) {
            let rows = try await early.value
            XCTAssertEqual(rows, 0, "the notes table existed when the first call ran")
            let applied = try await service.withPool { pool in try frozen.appliedMigrations(pool) }
            XCTAssertEqual(applied, ["createNotes"])
        }
    }

    func testAFailedSetUpFailsRunWithItsCode() async throws {
        let path = try makeServiceDatabase(key: 1)
        var options = FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        options.afterOpening = { pool in try pool.inDatabase { db in try db.execute("SELECT * FROM missing") } }
        let service = FMDatabaseService(path: path, options: options) { try rawProvider(1) }
        let early = Task { try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") } }
        do {
            try await service.run()
            XCTFail("run() served although its set-up failed")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_ERROR, "\(error)")
            XCTAssertTrue("\(error)".contains("set up"), "\(error)")
        }
        do {
            _ = try await early.value
            XCTFail("a call ran although the set-up failed")
        } catch {
            XCTAssertEqual(resultCode(error), SQLITE_ERROR, "\(error)")
        }
    }
}

/// Many calls at once through a small pool, then shutdown: every call ends, every write is in the file.
final class ServiceLoadTests: FMDBCipherTestCase {
    func testManyConcurrentCallsEndAndTheirWritesStay() async throws {
        let path = try makeServiceDatabase(key: 1)
        var configuration = FMDatabaseConfiguration()
        configuration.maximumNumberOfDatabasesToCreate = 4
        configuration.busyTimeout = 10
        configuration.prepareDatabase = { db in try db.executeQuery("PRAGMA journal_mode = WAL", values: nil).close() }
        let service = FMDatabaseService(
            path: path, configuration: configuration, options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        ) { try rawProvider(1) }
        let writes = 200
        try await runGroup(service) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<writes {
                    group.addTask {
                        try await service.performTransaction { db in
                            try db.execute("INSERT INTO t (v) VALUES (?)", "w\(index)")
                        }
                        _ = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
                    }
                }
                try await group.waitForAll()
            }
            let statistics = service.statistics
            XCTAssertLessThanOrEqual(statistics.pool.openConnections, 4)
            XCTAssertEqual(statistics.calls, 2 * writes)
            XCTAssertEqual(statistics.failedCalls, [:])
        }
        XCTAssertEqual(service.statistics.callsInFlight, 0)
        XCTAssertEqual(service.statistics.pool.openConnections, 0)
        let rows = try FMDatabaseQueue(path: path, keyProvider: rawProvider(1)).inDatabase { db in
            db.int(forQuery: "SELECT count(*) FROM t")
        }
        XCTAssertEqual(rows, Int32(writes + 1))
    }
}
