import FMDB

/// What an ``FMDatabaseService`` and its pool are doing now and have done since the service was made: a
/// snapshot (``FMDatabaseService/statistics``). The same values go to swift-metrics (see the article
/// <doc:RunningUnderServiceLifecycle>).
///
/// ```swift
/// let statistics = service.statistics
/// print("\(statistics.pool.checkedOutConnections) connections in use, \(statistics.callsInFlight) calls")
/// ```
public struct FMDatabaseServiceStatistics: Sendable, Hashable {
    /// Where the service is in its life.
    public enum Phase: Sendable, Hashable {
        /// `run()` has not been called: calls wait for it.
        case notStarted
        /// `run()` is opening the pool: calls wait for it.
        case starting
        /// The pool is open and serves calls.
        case running
        /// Graceful shutdown began: running calls end, new ones are refused.
        case draining
        /// `run()` ended: the pool is closed, calls are refused.
        case stopped
        /// `run()` could not open the pool: calls fail with its error.
        case failed
    }

    /// Where the service is in its life.
    public var phase: Phase
    /// The pool's own statistics (connections, waiters, key checks, key changes); zeros before the pool
    /// opened.
    public var pool: FMDatabaseStatistics
    /// Calls (`perform`, `performTransaction`, `withPool`, `checkHealth`, `reloadKey`) that ended, whatever
    /// their outcome.
    public var calls: Int
    /// Calls admitted to the open pool and not ended: running, or waiting for a connection (calls made before
    /// `run()` opened the pool count once it has).
    public var callsInFlight: Int
    /// Calls that threw, by what can be done about their error (`FMErrorDisposition`).
    public var failedCalls: [FMErrorDisposition: Int]
    /// The time calls spent before their block started (waiting for the pool to open, their turn and a
    /// connection), added up.
    public var waitTime: Duration
    /// Key reloads (``FMDatabaseService/reloadKey()``, SIGHUP) that handed the pool a new provider.
    public var reloadsSucceeded: Int
    /// Key reloads that failed: the key source could not be read or its key did not open the database. The
    /// pool kept the provider it had.
    public var reloadsFailed: Int
    /// Calls interrupted because they were still running when the drain timeout ran out.
    public var callsInterrupted: Int

    /// A snapshot with the values given.
    public init(
        phase: Phase = .notStarted, pool: FMDatabaseStatistics = FMDatabaseStatistics(), calls: Int = 0,
        callsInFlight: Int = 0, failedCalls: [FMErrorDisposition: Int] = [:], waitTime: Duration = .zero,
        reloadsSucceeded: Int = 0, reloadsFailed: Int = 0, callsInterrupted: Int = 0
    ) {
        self.phase = phase
        self.pool = pool
        self.calls = calls
        self.callsInFlight = callsInFlight
        self.failedCalls = failedCalls
        self.waitTime = waitTime
        self.reloadsSucceeded = reloadsSucceeded
        self.reloadsFailed = reloadsFailed
        self.callsInterrupted = callsInterrupted
    }
}
