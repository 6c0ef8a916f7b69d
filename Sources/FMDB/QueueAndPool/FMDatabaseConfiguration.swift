import Foundation
import Logging

/// How a queue or a pool opens and sets up its connections: one value, given once at init.
///
/// ```swift
/// var configuration = FMDatabaseConfiguration(keyProvider: PBKDF2KeyProvider(passphrase: passphrase))
/// configuration.logger = Logger(label: "store")
/// configuration.busyTimeout = 5
/// configuration.maximumNumberOfDatabasesToCreate = 8
/// configuration.prepareDatabase = { db in try db.executeUpdate("PRAGMA foreign_keys = ON", values: nil) }
/// let pool = try FMDatabasePool(path: path, configuration: configuration)
/// ```
///
/// The path, URL, open flags and VFS stay where FMDB has them, in the initializer.
///
/// - Note: FMDB compatibility: a Swift-native addition (GRDB's `Configuration`); its defaults behave as FMDB.
public struct FMDatabaseConfiguration: Sendable {
    /// Supplies the key of every connection; nil for an unencrypted database. A keyed queue or pool opens,
    /// keys and verifies its first connection at init, which then throws code 26 for a wrong key.
    public var keyProvider: (any KeyProvider)?
    /// Where the queue or pool and its connections log (default: label "fmdb", as FMDB).
    public var logger: Logger
    /// Whether the FMDB forms log the errors they meet and do not throw (default true, as FMDB).
    public var logsErrors: Bool
    /// Sets up each new connection, after it is keyed and verified and before any block gets it; nil sets up
    /// nothing. When it throws, the connection is closed and not used, and the call that needed it gets the
    /// error. It runs on the thread that opens the connection, outside the pool's lock; it must not call the
    /// queue or pool.
    public var prepareDatabase: (@Sendable (FMDatabase) throws -> Void)?
    /// Each connection's ``FMDatabase/maxBusyRetryTimeInterval``, set as it opens (its key check waits as
    /// long) and again before `prepareDatabase` runs: how long a statement waits for a lock another connection
    /// or process holds before it fails with `SQLITE_BUSY`; 0 does not wait. Nil (the default): FMDB's 2
    /// seconds, and a value a block sets on its connection stays with it.
    public var busyTimeout: TimeInterval?
    /// For a pool, the most connections it opens at once; 0 (the default) means no limit. A queue has one
    /// connection and ignores it.
    public var maximumNumberOfDatabasesToCreate: Int
    /// For a pool, how long a transaction waits for its turn behind the file's earlier pool transactions in
    /// this process (``FMDatabasePool/transactionQueueTimeout``); nil (the default) waits as long as it takes.
    /// A queue runs one block at a time and ignores it.
    public var transactionQueueTimeout: TimeInterval?

    /// A configuration; every argument has FMDB's behaviour as its default.
    public init(
        keyProvider: (any KeyProvider)? = nil,
        logger: Logger = Logger(label: "fmdb"),
        logsErrors: Bool = true,
        busyTimeout: TimeInterval? = nil,
        maximumNumberOfDatabasesToCreate: Int = 0,
        transactionQueueTimeout: TimeInterval? = nil,
        prepareDatabase: (@Sendable (FMDatabase) throws -> Void)? = nil
    ) {
        self.keyProvider = keyProvider
        self.logger = logger
        self.logsErrors = logsErrors
        self.busyTimeout = busyTimeout
        self.maximumNumberOfDatabasesToCreate = maximumNumberOfDatabasesToCreate
        self.transactionQueueTimeout = transactionQueueTimeout
        self.prepareDatabase = prepareDatabase
    }

    /// `prepareDatabase` with the busy timeout set first, as every connection gets it.
    var connectionSetUp: @Sendable (FMDatabase) throws -> Void {
        let busyTimeout = busyTimeout
        let prepareDatabase = prepareDatabase
        return { db in
            if let busyTimeout { db.maxBusyRetryTimeInterval = busyTimeout }
            try prepareDatabase?(db)
        }
    }
}
