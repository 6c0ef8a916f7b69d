import FMDB
import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UnixSignals

/// A keyed `FMDatabasePool` as a swift-service-lifecycle `Service`: ``run()`` opens the pool, serves
/// until graceful shutdown, lets running calls end and closes every connection; SIGHUP (or
/// ``reloadKey()``) reads the key source again and hands the pool the new key.
///
/// ```swift
/// let database = FMDatabaseService(
///     path: "/var/lib/app/app.db", systemdCredential: "app-db-key", holding: .rawKey)
/// let group = ServiceGroup(
///     services: [database, httpServer], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// // Anywhere, from async code:
/// let count = try await database.perform { db in db.int(forQuery: "SELECT count(*) FROM notes") }
/// ```
///
/// Making the service does nothing but keep its arguments: the key source is read and the database
/// opened by ``run()``. A call made before the pool is open waits for it (a cancelled task stops
/// waiting), and fails with `run()`'s error when the database cannot be opened. Once graceful shutdown
/// begins, new calls fail with ``FMDatabaseServiceError/Code-swift.enum/shutDown``; calls already made
/// run to their end, for at most ``FMDatabaseServiceOptions/drainTimeout``.
///
/// The key source is a closure that makes a key provider: it runs at start, at each reload and (unless
/// ``FMDatabaseServiceOptions/readsKeySourceOnKeyChange`` is off) when the pool meets the file under another
/// key, on a Dispatch thread (reading a file or a credential blocks). Keys never reach a log line, an error, a
/// metric or a label of the service.
///
/// Sendable: its mutable state is behind one lock; the pool is Sendable.
public final class FMDatabaseService: Service, Sendable, CustomStringConvertible {
    /// The database file.
    public let path: String
    /// How the pool opens and sets up its connections (its `keyProvider` is replaced by the key source's).
    public let configuration: FMDatabaseConfiguration
    /// How the service runs: drain timeout, SIGHUP, logging, metrics.
    public let options: FMDatabaseServiceOptions

    private let keySource: @Sendable () throws -> any KeyProvider
    /// `path` as logs show it (a `file:` URI without its query).
    private let shownPath: String
    private let logger: Logger
    private let metrics: ServiceMetrics
    private let state = Locked(State())

    /// The service and its file, as logs show it (a `ServiceGroup` names its services this way).
    public var description: String { "FMDatabaseService(\(shownPath))" }

    // MARK: - Making a service

    /// A service for the keyed database at `path`, whose key provider `keySource` makes, at start, at each
    /// reload and at a key change the pool meets.
    ///
    /// ```swift
    /// let service = FMDatabaseService(path: "/var/lib/app/app.db") {
    ///     try RawKeyProvider(material: KeyMaterial.read(from: .environment(name: "APP_DB_KEY")))
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - path: The database file (a `file:` URI when `configuration`'s open flags allow it is shown in logs
    ///     without its query).
    ///   - configuration: The pool's settings: pool size, busy timeout, connection set-up, logger. Its
    ///     `keyProvider` is not used: `keySource` supplies it.
    ///   - options: How the service runs.
    ///   - keySource: Makes the key provider; what it throws fails ``run()`` or ``reloadKey()``.
    public init(
        path: String,
        configuration: FMDatabaseConfiguration = FMDatabaseConfiguration(),
        options: FMDatabaseServiceOptions = FMDatabaseServiceOptions(),
        keySource: @escaping @Sendable () throws -> any KeyProvider
    ) {
        self.path = path
        self.configuration = configuration
        self.options = options
        self.keySource = keySource
        shownPath = FMDatabasePool.loggablePath(path)
        var logger = options.logger
        logger[metadataKey: "db.file"] = .string(shownPath)
        self.logger = logger
        metrics = ServiceMetrics(
            fileName: (shownPath as NSString).lastPathComponent,
            factory: options.metricsFactory ?? MetricsSystem.factory)
    }

    /// A service whose key is in a file (32 raw bytes or 64 hexadecimal digits for `.rawKey`; one trailing
    /// newline is dropped), read at start, at each reload and when the pool meets the file under another key:
    /// an operator writes the new key there, then runs the rekey.
    ///
    /// ```swift
    /// let service = FMDatabaseService(path: "/var/lib/app/app.db", keyFile: "/etc/app/db.key", holding: .rawKey)
    /// ```
    ///
    /// A key file group or others can change is refused (code 3, `SQLITE_PERM`), as `KeyMaterial.read` does.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - configuration: The pool's settings.
    ///   - keyFile: The file holding the key.
    ///   - usage: What the file holds: a passphrase, a raw key, or a key slot's secret.
    ///   - options: How the service runs.
    public convenience init(
        path: String,
        configuration: FMDatabaseConfiguration = FMDatabaseConfiguration(),
        keyFile: String,
        holding usage: SystemdCredentialKeyProvider.Usage,
        options: FMDatabaseServiceOptions = FMDatabaseServiceOptions()
    ) {
        self.init(path: path, configuration: configuration, options: options) {
            let material = try KeyMaterial.read(from: .file(path: keyFile), describedAs: "database key")
            return try Self.keyProvider(material, usage)
        }
    }

    /// A service whose key is the systemd credential `credential` (`LoadCredentialEncrypted=NAME:...` in the
    /// unit), read from `$CREDENTIALS_DIRECTORY` at start. systemd writes a credential when it starts the
    /// service and not again at `systemctl reload`, so a reload reads the same key: a key slot database
    /// (`.keySlot`) needs no reload for slot changes and data-key rotations; for a plain rekey without a
    /// restart, use a key file.
    ///
    /// ```swift
    /// // app.service:  LoadCredentialEncrypted=app-db-key:/etc/credstore.encrypted/app-db-key
    /// let service = FMDatabaseService(
    ///     path: "/var/lib/app/app.db", systemdCredential: "app-db-key", holding: .keySlot(.rawKey))
    /// ```
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - configuration: The pool's settings.
    ///   - credential: The credential's name.
    ///   - usage: What the credential holds.
    ///   - environment: Where `CREDENTIALS_DIRECTORY` is looked up (default: this process's, read at start).
    ///   - options: How the service runs.
    public convenience init(
        path: String,
        configuration: FMDatabaseConfiguration = FMDatabaseConfiguration(),
        systemdCredential credential: String,
        holding usage: SystemdCredentialKeyProvider.Usage,
        environment: [String: String]? = nil,
        options: FMDatabaseServiceOptions = FMDatabaseServiceOptions()
    ) {
        self.init(path: path, configuration: configuration, options: options) {
            try SystemdCredentialKeyProvider(
                credential: credential, usage: usage,
                environment: environment ?? ProcessInfo.processInfo.environment)
        }
    }

    /// The provider for a secret read from a key file, as `SystemdCredentialKeyProvider` makes one.
    private static func keyProvider(
        _ material: KeyMaterial, _ usage: SystemdCredentialKeyProvider.Usage
    ) throws -> any KeyProvider {
        switch usage {
        case .passphrase: return PassphraseKeyProvider(material: material)
        case .rawKey: return try RawKeyProvider(material: material)
        case .keySlot(.passphrase): return KeySlotKeyProvider(secret: .passphrase(material: material))
        case .keySlot(.rawKey): return KeySlotKeyProvider(secret: try .rawKey(material: material))
        case .keySlot(.recoveryKey): return KeySlotKeyProvider(secret: try .recoveryKey(material: material))
        }
    }

    // MARK: - Running

    /// Opens the pool, serves calls until graceful shutdown (or until the task is cancelled), then refuses
    /// new calls, waits for the running ones (at most ``FMDatabaseServiceOptions/drainTimeout``; past it
    /// their statements are interrupted) and closes every connection. While it serves, SIGHUP reloads the key
    /// (``FMDatabaseServiceOptions/reloadsKeyOnSIGHUP``).
    ///
    /// ```swift
    /// let group = ServiceGroup(services: [database], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// try await group.run()
    /// ```
    ///
    /// - Throws: when the database cannot be opened: an `FMDatabaseError` whose code is SQLite's (26,
    ///   `SQLITE_NOTADB`, for a key that does not open it; 14, `SQLITE_CANTOPEN`, for a missing file or an
    ///   unreadable key file or credential; 3, `SQLITE_PERM`, for a key file or credential others can change)
    ///   and whose message names the file as logs show it, never the key. Calls waiting for the pool fail
    ///   with it too. ``FMDatabaseServiceError/Code-swift.enum/alreadyRunning`` when `run()` was called
    ///   before.
    public func run() async throws {
        let claimed = state.withLock { state -> Bool in
            guard case .notStarted = state.phase else { return false }
            state.phase = .starting
            return true
        }
        guard claimed else { throw FMDatabaseServiceError(code: .alreadyRunning, file: shownPath) }
        // Installed before the pool opens, so a SIGHUP from the moment calls are served reloads and never
        // meets the default action (which ends the process).
        let signals = options.reloadsKeyOnSIGHUP ? await UnixSignalsSequence(trapping: .sighup) : nil
        log("opening the database")
        let pool: FMDatabasePool
        do {
            pool = try await Self.blocking { try self.openPool() }
        } catch {
            let failure = startError(error)
            let waiters = state.withLock { state in
                state.phase = .failed(failure)
                defer { state.waiters.removeAll() }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume(throwing: failure) }
            log("the database could not be opened: \(failure)")
            throw failure
        }
        let waiters = state.withLock { state in
            state.phase = .running(pool)
            state.inFlight += state.waiters.count
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: pool) }
        metrics.update(pool.statistics, limit: pool.maximumNumberOfDatabasesToCreate)
        log("serving")
        await withTaskGroup(of: Void.self) { group in
            if let signals {
                group.addTask {
                    for await _ in signals {
                        self.log("SIGHUP: reloading the key")
                        try? await self.reloadKey()
                    }
                }
            }
            // Returns at graceful shutdown, or throws when the task is cancelled: either way, stop. New calls
            // are refused from now on, also while a reload SIGHUP started ends (the group waits for it).
            try? await gracefulShutdown()
            let running = state.withLock { state in
                state.phase = .draining(pool)
                return state.inFlight
            }
            log("graceful shutdown: \(running) calls still running")
            group.cancelAll()
        }
        await drain(pool)
    }

    /// Opens the pool with the key source's provider and runs `afterOpening` (on a Dispatch thread: it reads
    /// files, derives keys, migrates).
    private func openPool() throws -> FMDatabasePool {
        var configuration = self.configuration
        configuration.keyProvider = try makeKeyProvider()
        configuration.logger[metadataKey: "db.file"] = .string(shownPath)
        let flags = SQLITE_OPEN_READWRITE | (options.createsMissingDatabase ? SQLITE_OPEN_CREATE : 0)
        let pool = try FMDatabasePool(path: path, flags: flags, configuration: configuration)
        guard let afterOpening = options.afterOpening else { return pool }
        do {
            try afterOpening(pool)
        } catch {
            pool.releaseAllDatabases()
            throw SetUpFailed(error: error)
        }
        return pool
    }

    /// The key source's provider; wrapped so that the pool reads the source again at a key change, when the
    /// options say so. On a Dispatch thread.
    private func makeKeyProvider() throws -> any KeyProvider {
        options.readsKeySourceOnKeyChange ? try ReloadableKeyProvider(keySource) : try keySource()
    }

    /// What `afterOpening` threw (the pool did open).
    private struct SetUpFailed: Error {
        let error: any Error
    }

    /// `run()`'s error for what opening threw: an `FMDatabaseError` keeps its code and says which file.
    private func startError(_ error: any Error) -> any Error {
        let setUp = error as? SetUpFailed
        guard let cause = (setUp?.error ?? error) as? FMDatabaseError else { return setUp?.error ?? error }
        let what = setUp == nil ? "could not open" : "could not set up (afterOpening)"
        return FMDatabaseError(
            code: cause.extendedCode, message: "The database service \(what) \(shownPath): \(cause.message)")
    }

    /// Waits for the running calls (bounded), interrupts what still runs, closes the pool. New calls are
    /// refused already (phase `draining`).
    private func drain(_ pool: FMDatabasePool) async {
        let deadline = ContinuousClock.now + options.drainTimeout
        await waitForCalls(until: deadline)
        let interrupted = state.withLock { state in
            guard state.inFlight > 0 else { return 0 }
            // Under the lock: a registered block has not ended, so its connection is open and checked out.
            for block in state.running.values { block.interrupt() }
            state.callsInterrupted += state.running.count
            return state.running.count
        }
        if interrupted > 0 {
            metrics.interrupted(interrupted)
            log("drain timeout: \(interrupted) running blocks interrupted")
            await waitForCalls(until: ContinuousClock.now + .seconds(1))
        }
        state.withLock { $0.phase = .stopped(pool) }
        pool.releaseAllDatabases()
        metrics.update(pool.statistics, limit: pool.maximumNumberOfDatabasesToCreate)
        log("closed: \(pool.countOfOpenDatabases) connections still open")
    }

    /// Waits until no call is in flight, `deadline` passes, or the task is cancelled.
    private func waitForCalls(until deadline: ContinuousClock.Instant) async {
        while state.withLock({ $0.inFlight }) > 0, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    // MARK: - Calls

    /// Runs `block` with a connection of the pool (`FMDatabasePool.perform`): reads run in parallel on
    /// separate connections; each statement that writes commits on its own.
    ///
    /// ```swift
    /// let titles = try await service.perform { db in
    ///     try db.query("SELECT title FROM notes").map { $0.string(forColumn: "title") }
    /// }
    /// ```
    ///
    /// Waits for ``run()`` to open the pool. Cancelling the task interrupts the block's statements.
    ///
    /// - Throws: what `block` or the pool throws (see `FMErrorDisposition` for what to do about it), `run()`'s
    ///   error when the database could not be opened, ``FMDatabaseServiceError`` once shutdown began.
    @discardableResult
    public func perform<T: Sendable>(_ block: @escaping @Sendable (FMDatabase) throws -> T) async throws -> T {
        try await serve { pool, tracker in
            try await pool.perform { db in try tracker.run(db) { try block(db) } }
        }
    }

    /// Runs `block` in a transaction of `kind` (`FMDatabasePool.performTransaction`): commits when it returns,
    /// rolls back when it throws. Default `.immediate`: the write lock is taken at BEGIN, so the transaction
    /// never fails to upgrade a read lock later.
    ///
    /// ```swift
    /// try await service.performTransaction { db in
    ///     try db.execute("INSERT INTO notes (title) VALUES (?)", title)
    /// }
    /// ```
    ///
    /// - Throws: as ``perform(_:)``; nothing of the block is committed when it throws.
    @discardableResult
    public func performTransaction<T: Sendable>(
        _ kind: FMDBTransactionKind = .immediate, _ block: @escaping @Sendable (FMDatabase) throws -> T
    ) async throws -> T {
        try await serve { pool, tracker in
            try await pool.performTransaction(kind) { db in try tracker.run(db) { try block(db) } }
        }
    }

    /// Runs `body` with the pool itself, for what the service does not forward (an async rekey, the pool's
    /// statistics): it counts as a running call, so shutdown waits for it. Do not keep the pool past `body`;
    /// its blocks are not interrupted at the drain timeout, and a blocking call on it (`inDatabase`, a
    /// migration) blocks the task's thread: run migrations in ``FMDatabaseServiceOptions/afterOpening``.
    ///
    /// ```swift
    /// try await service.withPool { pool in try await pool.rekey(using: newProvider) }
    /// ```
    ///
    /// - Throws: what `body` throws, `run()`'s error, or ``FMDatabaseServiceError`` once shutdown began.
    public func withPool<T>(_ body: (FMDatabasePool) async throws -> T) async throws -> T {
        try await serve { pool, _ in try await body(pool) }
    }

    /// Proves that the key in use still opens the database: a read of its schema table on a connection of
    /// the pool, after the connection's key check, without the write lock (a service's health endpoint).
    ///
    /// ```swift
    /// router.get("/health") { _, _ in
    ///     let health = try await database.checkHealth()
    ///     return "ok \(health.duration)"
    /// }
    /// ```
    ///
    /// - Returns: what the check read and how long it took.
    /// - Throws: an `FMDatabaseError`: code 26 (`SQLITE_NOTADB`) when the file is under a key the service does
    ///   not hold (rekeyed, and not reloaded), `SQLITE_BUSY` when another process holds an exclusive lock
    ///   past the busy timeout, an I/O error; or as ``perform(_:)``.
    public func checkHealth() async throws -> FMDatabaseServiceHealth {
        let started = ContinuousClock.now
        let objects = try await perform { db -> Int in
            // `sqlite_master`: also SQLCipher 3.4.1's SQLite (3.15), older than the name `sqlite_schema`.
            let rows = try db.executeQuery("SELECT count(*) FROM sqlite_master", values: nil)
            defer { rows.close() }
            guard try rows.nextWithError() else {
                throw FMDatabaseError(code: SQLITE_ERROR, message: "The health check's count returned no row.")
            }
            return rows.long(forColumnIndex: 0)
        }
        return FMDatabaseServiceHealth(schemaObjects: objects, duration: ContinuousClock.now - started)
    }

    /// Reads the key source again and hands the pool the provider it makes
    /// (`FMDatabasePool.replaceKeyProvider`): the pool checks its key on a new connection first, and
    /// switches only when that key opens the database. SIGHUP calls this while ``run()`` runs.
    ///
    /// ```swift
    /// try await service.reloadKey()   // after `fmdb-cipher rekey` with the new key in the key file
    /// ```
    ///
    /// A reload that fails changes nothing (the pool keeps the provider it had) and is counted
    /// (``FMDatabaseServiceStatistics/reloadsFailed``, metric `fmdb.key.reloads` with `outcome` `failure`) and
    /// logged at ``FMDatabaseServiceOptions/reloadFailureLogLevel``.
    ///
    /// - Throws: what the key source throws (a key file that cannot be read), code 26 when the new key does
    ///   not open the database, or as ``perform(_:)``.
    public func reloadKey() async throws {
        try await serve { pool, _ in
            do {
                try await Self.blocking { try pool.replaceKeyProvider(self.makeKeyProvider()) }
            } catch {
                state.withLock { $0.reloadsFailed += 1 }
                metrics.reloaded(succeeded: false)
                logger.log(
                    level: options.reloadFailureLogLevel,
                    "key reload failed; the service keeps the key it had: \(error)")
                throw error
            }
            state.withLock { $0.reloadsSucceeded += 1 }
            metrics.reloaded(succeeded: true)
            log("key reloaded")
        }
    }

    // MARK: - Statistics

    /// What the service and its pool are doing now and have done since the service was made.
    ///
    /// ```swift
    /// let inUse = service.statistics.pool.checkedOutConnections
    /// ```
    public var statistics: FMDatabaseServiceStatistics {
        var (snapshot, pool) = state.withLock { state in
            (
                FMDatabaseServiceStatistics(
                    phase: state.phase.name, calls: state.calls, callsInFlight: state.inFlight,
                    failedCalls: state.failedCalls, waitTime: state.waitTime,
                    reloadsSucceeded: state.reloadsSucceeded, reloadsFailed: state.reloadsFailed,
                    callsInterrupted: state.callsInterrupted),
                state.phase.pool
            )
        }
        if let pool { snapshot.pool = pool.statistics }
        return snapshot
    }

    // MARK: - Internals

    /// Runs one call: waits for the pool, runs `body`, counts and measures it.
    private func serve<T>(_ body: (FMDatabasePool, BlockTracker) async throws -> T) async throws -> T {
        let requested = ContinuousClock.now
        let pool: FMDatabasePool
        do {
            pool = try await admit()
        } catch {
            callEnded(requested: requested, pool: nil, error: error)
            throw error
        }
        let tracker = BlockTracker(service: self, id: state.withLock { $0.nextID() }, requested: requested)
        do {
            let value = try await body(pool, tracker)
            callEnded(requested: requested, pool: pool, error: nil)
            return value
        } catch {
            callEnded(requested: requested, pool: pool, error: error)
            throw error
        }
    }

    /// The pool, once open (waiting for it before), counted in flight; the error that keeps a call from it.
    private func admit() async throws -> FMDatabasePool {
        // The usual case, without a continuation: the pool is open.
        let open = state.withLock { state -> FMDatabasePool? in
            guard case .running(let pool) = state.phase else { return nil }
            state.inFlight += 1
            return pool
        }
        if let open { return open }
        let id = state.withLock { $0.nextID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<FMDatabasePool, any Error>) in
                let outcome: Result<FMDatabasePool, any Error>? = state.withLock { state in
                    switch state.phase {
                    case .running(let pool):
                        state.inFlight += 1
                        return .success(pool)
                    case .notStarted, .starting:
                        if state.cancelledWaiters.remove(id) != nil { return .failure(CancellationError()) }
                        state.waiters[id] = continuation
                        return nil
                    case .draining, .stopped:
                        return .failure(FMDatabaseServiceError(code: .shutDown, file: shownPath))
                    case .failed(let error):
                        return .failure(error)
                    }
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<FMDatabasePool, any Error>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                switch state.phase {
                case .notStarted, .starting: state.cancelledWaiters.insert(id)  // Cancelled before it waited.
                default: break
                }
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// A call ended (admitted to the pool when `pool` is not nil): counts, metrics.
    private func callEnded(requested: ContinuousClock.Instant, pool: FMDatabasePool?, error: (any Error)?) {
        let disposition = error.map(FMErrorDisposition.init)
        state.withLock { state in
            if pool != nil { state.inFlight -= 1 }
            state.calls += 1
            if let disposition { state.failedCalls[disposition, default: 0] += 1 }
        }
        metrics.callEnded(duration: ContinuousClock.now - requested, failure: disposition)
        if let pool { metrics.update(pool.statistics, limit: pool.maximumNumberOfDatabasesToCreate) }
    }

    /// A call's block starts on `database` (on the pool's thread): it can be interrupted at the drain timeout.
    fileprivate func blockStarted(_ id: Int, _ database: FMDatabase, requested: ContinuousClock.Instant) {
        let waited = ContinuousClock.now - requested
        let block = RunningBlock(database: database)
        state.withLock { state in
            state.running[id] = block
            state.waitTime += waited
        }
        metrics.waited(waited)
    }

    /// A call's block ended: it is no longer interrupted at the drain timeout.
    fileprivate func blockEnded(_ id: Int) {
        _ = state.withLock { $0.running.removeValue(forKey: id) }
    }

    private func log(_ message: @autoclosure () -> Logger.Message) {
        logger.log(level: options.logLevel, message())
    }

    /// The result of `work`, run on a Dispatch thread: it may block (a file, a lock, a key derivation), which
    /// a thread of the cooperative pool must never do. Not cancellable: `work` runs to its end.
    private static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}

extension FMDatabaseService {
    fileprivate enum Phase {
        case notStarted
        case starting
        case running(FMDatabasePool)
        case draining(FMDatabasePool)
        case stopped(FMDatabasePool)
        case failed(any Error)

        var name: FMDatabaseServiceStatistics.Phase {
            switch self {
            case .notStarted: return .notStarted
            case .starting: return .starting
            case .running: return .running
            case .draining: return .draining
            case .stopped: return .stopped
            case .failed: return .failed
            }
        }

        var pool: FMDatabasePool? {
            switch self {
            case .running(let pool), .draining(let pool), .stopped(let pool): return pool
            case .notStarted, .starting, .failed: return nil
            }
        }
    }

    fileprivate struct State {
        var phase = Phase.notStarted
        /// Calls waiting for the pool to open, by id.
        var waiters: [Int: CheckedContinuation<FMDatabasePool, any Error>] = [:]
        /// Calls whose task was cancelled before they started waiting.
        var cancelledWaiters: Set<Int> = []
        var lastID = 0
        /// Calls admitted to the pool and not ended.
        var inFlight = 0
        /// Blocks running now, by call id.
        var running: [Int: RunningBlock] = [:]
        var calls = 0
        var failedCalls: [FMErrorDisposition: Int] = [:]
        var waitTime = Duration.zero
        var reloadsSucceeded = 0
        var reloadsFailed = 0
        var callsInterrupted = 0

        mutating func nextID() -> Int {
            lastID += 1
            return lastID
        }
    }
}

/// A block running on a connection, which the drain timeout may interrupt from another thread.
///
/// @unchecked Sendable: only `interrupt()` is called from another thread, which SQLite allows
/// (`sqlite3_interrupt` is safe from any thread while the connection is open), and only while the block is
/// registered: its connection is checked out, so the pool does not close it meanwhile.
private struct RunningBlock: @unchecked Sendable {
    let database: FMDatabase

    func interrupt() {
        database.interrupt()
    }
}

/// One call's hooks around its block: registers it while it runs, measures its wait.
private final class BlockTracker: Sendable {
    private let service: FMDatabaseService
    private let id: Int
    private let requested: ContinuousClock.Instant

    init(service: FMDatabaseService, id: Int, requested: ContinuousClock.Instant) {
        self.service = service
        self.id = id
        self.requested = requested
    }

    func run<T>(_ database: FMDatabase, _ block: () throws -> T) rethrows -> T {
        service.blockStarted(id, database, requested: requested)
        defer { service.blockEnded(id) }
        return try block()
    }
}
