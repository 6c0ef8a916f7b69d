import FMDB
import FMDBService
import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import XCTest

/// What the drain does at shutdown: past the drain timeout every call still in flight is cancelled (a block
/// between statements included: its next statement fails, its transaction rolls back; a call waiting for a
/// connection stops waiting), and `run()` returns only once they ended, with no connection open; a SIGHUP
/// reload in progress does not hold `run()` past the service group's cancellation.
final class ServiceDrainTests: FMDBCipherTestCase {
    func testPastTheDrainTimeoutCallsAreCancelledAndNothingWritesAfterRunReturns() async throws {
        let path = try makeServiceDatabase(key: 1)
        var configuration = FMDatabaseConfiguration()
        configuration.maximumNumberOfDatabasesToCreate = 1
        let options = FMDatabaseServiceOptions(drainTimeout: .milliseconds(200), reloadsKeyOnSIGHUP: false)
        let service = FMDatabaseService(path: path, configuration: configuration, options: options) {
            try rawProvider(1)
        }
        let first = Locked<Result<Int, any Error>?>(nil)
        let second = Locked<Result<Int, any Error>?>(nil)
        let importEnded = Locked<ContinuousClock.Instant?>(nil)
        try await runGroup(service) {
            let running = Locked(false)
            Task {
                do {
                    // An import: one row at a time, with some work between rows.
                    try await service.performTransaction { db in
                        running.withLock { $0 = true }
                        for index in 0..<20 {
                            try db.execute("INSERT INTO t (v) VALUES (?)", "row \(index)")
                            usleep(200_000)
                        }
                        importEnded.withLock { $0 = .now }
                    }
                    first.withLock { $0 = .success(1) }
                } catch {
                    first.withLock { $0 = .failure(error) }
                }
            }
            await eventually("the import runs") { running.withLock { $0 } }
            Task {
                do {
                    try await service.perform { db in try db.execute("INSERT INTO t (v) VALUES ('waiter')") }
                    second.withLock { $0 = .success(1) }
                } catch {
                    second.withLock { $0 = .failure(error) }
                }
            }
            await eventually("the second call is admitted") { service.statistics.callsInFlight == 2 }
        }
        let runReturned = ContinuousClock.now
        let atReturn = service.statistics
        XCTAssertEqual(atReturn.callsInFlight, 0, "run() returned while calls still ran")
        XCTAssertEqual(atReturn.pool.openConnections, 0, "a connection is open in the stopped service's pool")
        XCTAssertEqual(atReturn.callsInterrupted, 2, "the import and the call waiting for its connection")
        await eventually("both callers have their answer") {
            first.withLock { $0 } != nil && second.withLock { $0 } != nil
        }
        guard case .failure(let importError) = first.withLock({ $0 }) else {
            return XCTFail("the import committed or did not end: \(String(describing: first.withLock { $0 }))")
        }
        let code = (importError as? FMDatabaseError)?.resultCode
        XCTAssertTrue(
            code == SQLITE_INTERRUPT || importError is CancellationError, "the import was stopped: \(importError)")
        guard case .failure(let waiterError) = second.withLock({ $0 }) else {
            return XCTFail("the waiting call ran: \(String(describing: second.withLock { $0 }))")
        }
        XCTAssertTrue(waiterError is CancellationError, "\(waiterError)")
        if let ended = importEnded.withLock({ $0 }) { XCTAssertLessThan(ended, runReturned) }
        let rows = try FMDatabaseQueue(path: path, keyProvider: rawProvider(1)).inDatabase { db in
            db.int(forQuery: "SELECT count(*) FROM t WHERE v LIKE 'row %' OR v = 'waiter'")
        }
        XCTAssertEqual(rows, 0, "the import rolled back; the waiting call wrote nothing")
    }
}

/// A SIGHUP reload in progress at shutdown (a slow key source) holds `run()` no longer than the group allows.
final class ServiceSignalDrainTests: FMDBCipherTestCase {
    func testASIGHUPReloadInProgressDoesNotHoldRunPastTheGroupsCancellation() async throws {
        let path = try makeServiceDatabase(key: 1)
        let reads = Locked(0)
        let options = FMDatabaseServiceOptions(
            drainTimeout: .milliseconds(200), reloadsKeyOnSIGHUP: true, readsKeySourceOnKeyChange: false)
        let service = FMDatabaseService(path: path, options: options) {
            let read = reads.withLock { count -> Int in
                count += 1
                return count
            }
            if read == 2 { sleep(5) }  // A slow key source at the reload: a vault, a network mount.
            return try rawProvider(1)
        }
        let shutdownBegan = Locked<ContinuousClock.Instant?>(nil)
        var configuration = ServiceGroupConfiguration(
            services: [
                .init(service: service),
                .init(
                    service: Driver {
                        _ = try await service.checkHealth()
                        XCTAssertEqual(kill(getpid(), SIGHUP), 0)
                        await eventually("the SIGHUP reload reads the key source") { reads.withLock { $0 } == 2 }
                        shutdownBegan.withLock { $0 = .now }
                    },
                    successTerminationBehavior: .gracefullyShutdownGroup,
                    failureTerminationBehavior: .gracefullyShutdownGroup),
            ],
            logger: Logger(label: "service-drain-test"))
        configuration.maximumGracefulShutdownDuration = .milliseconds(500)
        try? await ServiceGroup(configuration: configuration).run()
        let began = try XCTUnwrap(shutdownBegan.withLock { $0 })
        let took = ContinuousClock.now - began
        XCTAssertLessThan(took, .seconds(2), "run() outlived the group's cancellation (drain 0.2 s, group 0.5 s)")
    }
}
