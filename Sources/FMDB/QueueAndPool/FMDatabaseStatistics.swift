import Foundation
import Synchronization

/// What a pool is doing now and has done since it was made: a snapshot, for a service's health page and
/// its metrics (the FMDBService product exports it through swift-metrics).
///
/// ```swift
/// let statistics = pool.statistics
/// print("\(statistics.checkedOutConnections) of \(statistics.openConnections) connections in use")
/// ```
///
/// The counts of connections, the waiters, checkouts and wait time are read together, under the lock of the
/// pool's connections, so they agree with one another; the key checks and key changes are read just after.
/// No value holds a key, SQL or a path.
///
/// - Note: FMDB compatibility: an addition (FMDB has `countOfOpenDatabases` and its two siblings only).
public struct FMDatabaseStatistics: Sendable, Hashable {
    /// Open connections: idle ones and checked-out ones (``FMDatabasePool/countOfOpenDatabases``).
    public var openConnections: Int
    /// Connections idle in the pool (``FMDatabasePool/countOfCheckedInDatabases``).
    public var idleConnections: Int
    /// Connections in use by blocks now (``FMDatabasePool/countOfCheckedOutDatabases``).
    public var checkedOutConnections: Int
    /// Connections being opened and keyed now (they count toward the pool's limit).
    public var openingConnections: Int
    /// Calls waiting now for a connection: the pool at ``FMDatabasePool/maximumNumberOfDatabasesToCreate``, or a
    /// rekey running.
    public var waitingCalls: Int
    /// Checkouts since the pool was made: idle connections handed to blocks, and places given to open a new one.
    public var checkouts: Int
    /// The time calls spent waiting for a connection (at the pool's limit, or behind a rekey), added up since
    /// the pool was made.
    public var waitTime: Duration
    /// Key checks run on connections (a read of the database header under the connection's key, before or
    /// after a block; one answered by the 1 ms interval without a read is not counted).
    public var keyChecks: Int
    /// Key changes and file replacements the pool met (each made it drop its connections and ask the key
    /// provider again), and connections it replaced because they could no longer read the file.
    public var keyChangesSeen: Int

    /// A snapshot with the values given (for tests and for types that wrap a pool's statistics).
    public init(
        openConnections: Int = 0, idleConnections: Int = 0, checkedOutConnections: Int = 0,
        openingConnections: Int = 0, waitingCalls: Int = 0, checkouts: Int = 0,
        waitTime: Duration = .zero, keyChecks: Int = 0, keyChangesSeen: Int = 0
    ) {
        self.openConnections = openConnections
        self.idleConnections = idleConnections
        self.checkedOutConnections = checkedOutConnections
        self.openingConnections = openingConnections
        self.waitingCalls = waitingCalls
        self.checkouts = checkouts
        self.waitTime = waitTime
        self.keyChecks = keyChecks
        self.keyChangesSeen = keyChangesSeen
    }
}

extension FMDatabasePool {
    /// What the pool is doing now and has done since it was made (see ``FMDatabaseStatistics``).
    ///
    /// ```swift
    /// let waiting = pool.statistics.waitingCalls
    /// ```
    public var statistics: FMDatabaseStatistics {
        let now = connections.statistics
        return FMDatabaseStatistics(
            openConnections: now.idle + now.checkedOut, idleConnections: now.idle,
            checkedOutConnections: now.checkedOut, openingConnections: now.creating, waitingCalls: now.waiters,
            checkouts: now.checkouts, waitTime: now.waitTime, keyChecks: statisticsCounters.keyChecks,
            keyChangesSeen: statisticsCounters.keyChanges)
    }
}

/// What a pool counts beside its connections' statistics (Core/BoundedPool.swift): key checks and key
/// changes, each an atomic of its own, so a hook is one line wherever it stands and costs one relaxed add.
///
/// Sendable: atomics only.
final class StatisticsCounters: Sendable {
    private let keyCheckCount = Atomic<Int>(0)
    private let keyChangeCount = Atomic<Int>(0)

    init() {}

    /// A connection ran a key check (a read of the header under its key).
    func countKeyCheck() { keyCheckCount.add(1, ordering: .relaxed) }

    /// The pool met a key change, a replaced file or an unreadable connection.
    func countKeyChange() { keyChangeCount.add(1, ordering: .relaxed) }

    var keyChecks: Int { keyCheckCount.load(ordering: .relaxed) }
    var keyChanges: Int { keyChangeCount.load(ordering: .relaxed) }
}

extension FMDatabasePool {
    /// `path` as the library's logs and errors show it: a `file:` URI loses its query (which may hold a key);
    /// any other path is shown as given. For a service's own log lines and metric labels about the file.
    ///
    /// ```swift
    /// logger[metadataKey: "db.file"] = .string(FMDatabasePool.loggablePath(path))
    /// ```
    public static func loggablePath(_ path: String) -> String {
        SQLRedaction.loggablePath(path)
    }
}
