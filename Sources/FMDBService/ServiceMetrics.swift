import FMDB
import Foundation
import Metrics

/// The service's metrics, under OpenTelemetry's database names where one exists (`db.client.*`, with
/// `db.system.name = sqlite`) and `fmdb.*` names for the rest. Labels hold the database's file name (as logs
/// show it) and fixed words, never a key or SQL.
///
/// Sendable: the metric objects are thread-safe (swift-metrics' handlers are), and the last totals seen are
/// behind a lock.
final class ServiceMetrics: Sendable {
    private let succeeded: Metrics.Timer
    private let failedDurations: [FMErrorDisposition: Metrics.Timer]
    private let failures: [FMErrorDisposition: Counter]
    private let waitTime: Metrics.Timer
    private let idle: Gauge
    private let used: Gauge
    private let pending: Gauge
    private let maximum: Gauge
    private let keyChecks: Counter
    private let keyChanges: Counter
    private let reloadsSucceeded: Counter
    private let reloadsFailed: Counter
    private let interrupted: Counter
    /// The pool's totals at the last update, for the counters' increments.
    private let lastTotals = Locked<(keyChecks: Int, keyChanges: Int)>((0, 0))

    static let dispositions: [FMErrorDisposition] = [.transient, .connectionReplaced, .cancelled, .permanent]

    init(fileName: String, factory: any MetricsFactory) {
        let system = ("db.system.name", "sqlite")
        let namespace = ("db.namespace", fileName)
        let poolName = ("db.client.connection.pool.name", fileName)
        succeeded = Timer(label: "db.client.operation.duration", dimensions: [system, namespace], factory: factory)
        var durations: [FMErrorDisposition: Metrics.Timer] = [:]
        var failures: [FMErrorDisposition: Counter] = [:]
        for disposition in Self.dispositions {
            let type = ("error.type", disposition.description)
            durations[disposition] = Timer(
                label: "db.client.operation.duration", dimensions: [system, namespace, type], factory: factory)
            failures[disposition] = Counter(
                label: "fmdb.operation.failures", dimensions: [system, namespace, type], factory: factory)
        }
        failedDurations = durations
        self.failures = failures
        waitTime = Timer(label: "db.client.connection.wait_time", dimensions: [system, poolName], factory: factory)
        idle = Gauge(
            label: "db.client.connection.count",
            dimensions: [system, poolName, ("db.client.connection.state", "idle")], factory: factory)
        used = Gauge(
            label: "db.client.connection.count",
            dimensions: [system, poolName, ("db.client.connection.state", "used")], factory: factory)
        pending = Gauge(
            label: "db.client.connection.pending_requests", dimensions: [system, poolName], factory: factory)
        maximum = Gauge(label: "db.client.connection.max", dimensions: [system, poolName], factory: factory)
        keyChecks = Counter(label: "fmdb.key.checks", dimensions: [system, namespace], factory: factory)
        keyChanges = Counter(label: "fmdb.key.changes", dimensions: [system, namespace], factory: factory)
        reloadsSucceeded = Counter(
            label: "fmdb.key.reloads", dimensions: [system, namespace, ("outcome", "success")], factory: factory)
        reloadsFailed = Counter(
            label: "fmdb.key.reloads", dimensions: [system, namespace, ("outcome", "failure")], factory: factory)
        interrupted = Counter(label: "fmdb.operation.interrupted", dimensions: [system, namespace], factory: factory)
    }

    /// A call ended: its duration, and its failure's disposition when it threw.
    func callEnded(duration: Duration, failure: FMErrorDisposition?) {
        let nanoseconds = Self.nanoseconds(duration)
        if let failure {
            failedDurations[failure]?.recordNanoseconds(nanoseconds)
            failures[failure]?.increment()
        } else {
            succeeded.recordNanoseconds(nanoseconds)
        }
    }

    /// A call's block started this long after the call.
    func waited(_ duration: Duration) {
        waitTime.recordNanoseconds(Self.nanoseconds(duration))
    }

    func reloaded(succeeded: Bool) {
        (succeeded ? reloadsSucceeded : reloadsFailed).increment()
    }

    func interrupted(_ count: Int) {
        interrupted.increment(by: count)
    }

    /// The pool's state now: its connection gauges, and the key counters' increments since the last update.
    func update(_ statistics: FMDatabaseStatistics, limit: Int) {
        idle.record(statistics.idleConnections)
        used.record(statistics.checkedOutConnections)
        pending.record(statistics.waitingCalls)
        if limit > 0 { maximum.record(limit) }
        let (checks, changes) = lastTotals.withLock { last in
            let increments = (
                max(0, statistics.keyChecks - last.keyChecks), max(0, statistics.keyChangesSeen - last.keyChanges)
            )
            last = (max(last.keyChecks, statistics.keyChecks), max(last.keyChanges, statistics.keyChangesSeen))
            return increments
        }
        if checks > 0 { keyChecks.increment(by: checks) }
        if changes > 0 { keyChanges.increment(by: changes) }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
