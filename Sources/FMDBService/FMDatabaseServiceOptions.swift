import FMDB
import Logging
import Metrics

/// How an ``FMDatabaseService`` runs: its drain timeout, its signal handling, where it logs and where its
/// metrics go. The database's own settings (pool size, busy timeout, connection set-up) are the
/// `FMDatabaseConfiguration` given beside it.
///
/// ```swift
/// var options = FMDatabaseServiceOptions()
/// options.drainTimeout = .seconds(20)
/// options.logger = Logger(label: "app.db")
/// let service = FMDatabaseService(
///     path: "/var/lib/app/app.db", keyFile: "/etc/app/db.key", holding: .rawKey, options: options)
/// ```
public struct FMDatabaseServiceOptions: Sendable {
    /// How long `run()` waits, after graceful shutdown began, for the calls still running to end. Past it,
    /// each is cancelled as its task would be: the statement it runs and every later one fail with
    /// `SQLITE_INTERRUPT` (its transaction rolls back) and the call throws `CancellationError`
    /// (`FMErrorDisposition.cancelled`); a call waiting for a connection stops waiting;
    /// `run()` waits for them to end, then closes the pool. Default 10 seconds. A block busy between
    /// statements ends only when it reaches its next one: the service group's
    /// `maximumGracefulShutdownDuration` bounds that wait (`run()` then returns at once, and such a block's
    /// connection closes when it ends).
    public var drainTimeout: Duration
    /// Whether `run()` reloads the key when the process gets SIGHUP (`systemctl reload` with
    /// `ExecReload=/bin/kill -HUP $MAINPID`). Default true. Set false when the program handles SIGHUP itself:
    /// there can be one handler per signal; call ``FMDatabaseService/reloadKey()`` from it.
    public var reloadsKeyOnSIGHUP: Bool
    /// Whether the pool reads the key source again by itself when a connection meets the file under a key it
    /// does not hold (an operator's rekey): the key source's provider is wrapped in a `ReloadableKeyProvider`.
    /// Default true: after `fmdb-cipher rekey`, with the new key written to the key file first, the service
    /// goes on without a reload. Set false for a source that can be read once only (an environment variable
    /// unset after reading): a key change then waits for ``FMDatabaseService/reloadKey()``.
    public var readsKeySourceOnKeyChange: Bool
    /// Whether `run()` creates the database when no file is at the path. Default false: a service that finds
    /// no database fails to start (code 14, `SQLITE_CANTOPEN`) instead of serving an empty new one (a wrong
    /// path, a volume not mounted). Set true for a service that makes its own database on first start.
    public var createsMissingDatabase: Bool
    /// Where the service logs its own lines (starting, draining, closing, reloads), each with metadata
    /// `db.file` (the path as logs show it, never a key). Default label "fmdb.service".
    public var logger: Logger
    /// The level of the service's own lines. Default `.debug`: a library stays below `.info` unless the program
    /// asks; raise it to see them at the program's level.
    public var logLevel: Logger.Level
    /// The level of the line that reports a failed key reload (it has no caller to throw to when SIGHUP started
    /// it). Default `.debug`, as every line of a library; a service under systemd usually wants `.warning`, so
    /// the journal shows a reload that kept the old key. The failure is also counted (statistics and the
    /// `fmdb.key.reloads` metric, `outcome` `failure`).
    public var reloadFailureLogLevel: Logger.Level
    /// Where the service's metrics go; nil (the default) uses the factory the program bootstrapped
    /// (`MetricsSystem.bootstrap`), read when the service is made.
    public var metricsFactory: (any MetricsFactory)?
    /// Runs once when `run()` has opened the pool, before any call is served (calls made meanwhile wait):
    /// schema migrations, a check of the schema. It runs on a Dispatch thread and may block. When it throws,
    /// the pool is closed and `run()` fails with its error (an `FMDatabaseError` keeps its code). Default nil.
    ///
    /// ```swift
    /// options.afterOpening = { pool in try migrator.migrate(pool) }
    /// ```
    public var afterOpening: (@Sendable (FMDatabasePool) throws -> Void)?

    /// Options with the defaults given above.
    public init(
        drainTimeout: Duration = .seconds(10),
        reloadsKeyOnSIGHUP: Bool = true,
        readsKeySourceOnKeyChange: Bool = true,
        createsMissingDatabase: Bool = false,
        logger: Logger = Logger(label: "fmdb.service"),
        logLevel: Logger.Level = .debug,
        reloadFailureLogLevel: Logger.Level = .debug,
        metricsFactory: (any MetricsFactory)? = nil,
        afterOpening: (@Sendable (FMDatabasePool) throws -> Void)? = nil
    ) {
        self.drainTimeout = drainTimeout
        self.reloadsKeyOnSIGHUP = reloadsKeyOnSIGHUP
        self.readsKeySourceOnKeyChange = readsKeySourceOnKeyChange
        self.createsMissingDatabase = createsMissingDatabase
        self.logger = logger
        self.logLevel = logLevel
        self.reloadFailureLogLevel = reloadFailureLogLevel
        self.metricsFactory = metricsFactory
        self.afterOpening = afterOpening
    }
}
