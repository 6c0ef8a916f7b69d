import FMDB
import FMDBService
import Foundation
import Logging
import Metrics
import MetricsTestKit
import ServiceLifecycle
import TestSupport
import XCTest

/// The service's statistics, its swift-metrics export (through an injected TestMetrics) and its log lines.
final class ServiceObservabilityTests: FMDBCipherTestCase {
    private func has(_ dimensions: [(String, String)], _ key: String, _ value: String) -> Bool {
        dimensions.contains { $0.0 == key && $0.1 == value }
    }

    func testMetricsUseOpenTelemetryNamesAndNoKeyOrSQL() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let metrics = TestMetrics()
        var configuration = FMDatabaseConfiguration()
        configuration.maximumNumberOfDatabasesToCreate = 3
        let service = FMDatabaseService(
            path: path, configuration: configuration, keyFile: keyFile, holding: .rawKey,
            options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false, metricsFactory: metrics))
        try await runGroup(service) {
            for _ in 0..<3 {
                _ = try await service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
                try await Task.sleep(for: .milliseconds(2))  // Past the key check interval: checked again.
            }
            do {
                try await service.perform { db in try db.execute("SELECT * FROM no_such_table") }
                XCTFail("a query of a missing table succeeded")
            } catch {
                XCTAssertEqual(FMErrorDisposition(error), .permanent)
            }
            try writeKeyFile(keyFile, key: 9)
            try? await service.reloadKey()
            try writeKeyFile(keyFile, key: 1)
            try await service.reloadKey()
        }
        let durations = metrics.timers(label: "db.client.operation.duration")
        let succeeded = durations.filter { !$0.dimensions.contains { $0.0 == "error.type" } }
        XCTAssertEqual(succeeded.count, 1)
        XCTAssertTrue(succeeded.allSatisfy { has($0.dimensions, "db.system.name", "sqlite") })
        XCTAssertTrue(succeeded.allSatisfy { has($0.dimensions, "db.namespace", "app.db") })
        XCTAssertGreaterThanOrEqual(succeeded.first?.values.count ?? 0, 4, "3 reads and a reload")
        let permanent = durations.filter { has($0.dimensions, "error.type", "permanent") }
        XCTAssertEqual(permanent.first?.values.count, 2, "the failed query and the failed reload")
        XCTAssertEqual(
            metrics.counters(label: "fmdb.operation.failures").filter { has($0.dimensions, "error.type", "permanent") }
                .first?.totalValue, 2)
        let reloads = metrics.counters(label: "fmdb.key.reloads")
        XCTAssertEqual(reloads.first { has($0.dimensions, "outcome", "success") }?.totalValue, 1)
        XCTAssertEqual(reloads.first { has($0.dimensions, "outcome", "failure") }?.totalValue, 1)
        XCTAssertGreaterThanOrEqual(metrics.counters(label: "fmdb.key.checks").first?.totalValue ?? 0, 1)
        let waits = metrics.timers(label: "db.client.connection.wait_time")
        XCTAssertTrue(waits.allSatisfy { has($0.dimensions, "db.client.connection.pool.name", "app.db") })
        XCTAssertGreaterThanOrEqual(waits.first?.values.count ?? 0, 4)
        let counts = metrics.recorders.filter { $0.label == "db.client.connection.count" }
        XCTAssertEqual(
            Set(counts.compactMap { $0.dimensions.first { $0.0 == "db.client.connection.state" }?.1 }),
            ["idle", "used"])
        XCTAssertEqual(
            counts.first { has($0.dimensions, "db.client.connection.state", "idle") }?.lastValue, 0,
            "no idle connection once the service stopped")
        XCTAssertEqual(metrics.recorders.first { $0.label == "db.client.connection.max" }?.lastValue, 3)
        // No label holds a key, SQL or the directory.
        let labels =
            metrics.timers.flatMap(\.dimensions) + metrics.counters.flatMap(\.dimensions)
            + metrics.recorders.flatMap(\.dimensions)
        for (name, value) in labels {
            XCTAssertFalse(value.contains(hexKey(1)) || value.contains(hexKey(9)), "\(name) holds a key")
            XCTAssertFalse(value.uppercased().contains("SELECT"), "\(name) holds SQL")
            XCTAssertFalse(value.contains("/"), "\(name) holds a directory: \(value)")
        }
    }

    func testStatisticsCountCallsFailuresAndWaiters() async throws {
        let path = try makeServiceDatabase(key: 1)
        var configuration = FMDatabaseConfiguration()
        configuration.maximumNumberOfDatabasesToCreate = 1
        let service = FMDatabaseService(
            path: path, configuration: configuration, options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        ) { try rawProvider(1) }
        try await runGroup(service) {
            let holding = Locked(false)
            let release = Locked(false)
            async let held: Void = service.perform { _ in
                holding.withLock { $0 = true }
                while !release.withLock({ $0 }) { usleep(1_000) }
            }
            await eventually("the only connection is held") { holding.withLock { $0 } }
            async let waiting = service.perform { db in db.int(forQuery: "SELECT count(*) FROM t") }
            await eventually("a call waits for the connection") { service.statistics.pool.waitingCalls == 1 }
            let during = service.statistics
            XCTAssertEqual(during.callsInFlight, 2)
            XCTAssertEqual(during.pool.checkedOutConnections, 1)
            XCTAssertEqual(during.pool.openConnections, 1)
            usleep(20_000)
            release.withLock { $0 = true }
            _ = try await held
            let rows = try await waiting
            XCTAssertEqual(rows, 1)
            do {
                try await service.perform { db in try db.execute("INSERT INTO missing VALUES (1)") }
            } catch {}
            let after = service.statistics
            XCTAssertEqual(after.calls, 3)
            XCTAssertEqual(after.callsInFlight, 0)
            XCTAssertEqual(after.failedCalls, [.permanent: 1])
            XCTAssertGreaterThanOrEqual(after.pool.checkouts, 3)
            XCTAssertEqual(after.pool.waitingCalls, 0)
            XCTAssertGreaterThanOrEqual(after.pool.waitTime, .milliseconds(10), "the waiter waited 20 ms or so")
            XCTAssertGreaterThanOrEqual(after.waitTime, .milliseconds(10))
        }
    }

    func testLogLinesCarryTheFileAndStayBelowInfo() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let capture = MetadataLogCapture()
        var options = FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        options.logger = capture.logger(label: "fmdb.service")
        let service = FMDatabaseService(path: path, keyFile: keyFile, holding: .rawKey, options: options)
        try await runGroup(service) {
            _ = try await service.checkHealth()  // Open before the key file changes.
            try writeKeyFile(keyFile, key: 7)
            try? await service.reloadKey()
        }
        let lines = capture.all
        XCTAssertGreaterThanOrEqual(lines.count, 4, "opening, serving, draining, closed, the failed reload")
        for line in lines {
            XCTAssertEqual(line.metadata["db.file"], path, "every line names the file: \(line.message)")
            XCTAssertLessThan(line.level, .info, "a library's lines stay below info: \(line.message)")
            XCTAssertFalse(line.message.contains(hexKey(1)) || line.message.contains(hexKey(7)), line.message)
        }
        XCTAssertTrue(lines.contains { $0.message.contains("key reload failed") })
    }

    func testReloadFailureLevelIsTheProgramsChoice() async throws {
        let path = try makeServiceDatabase(key: 1)
        let capture = MetadataLogCapture()
        var options = FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false, reloadFailureLogLevel: .warning)
        options.logger = capture.logger(label: "fmdb.service")
        let attempts = Locked(0)
        let service = FMDatabaseService(path: path, options: options) {
            let attempt = attempts.withLock { count -> Int in
                count += 1
                return count
            }
            if attempt > 1 { throw FMDatabaseError(code: SQLITE_CANTOPEN, message: "no key file") }
            return try rawProvider(1)
        }
        try await runGroup(service) {
            try? await service.reloadKey()
        }
        let warnings = capture.all.filter { $0.level == .warning }
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings.first?.message.contains("no key file") ?? false)
    }
}
