import Foundation
import Logging

/// What `FMDatabaseQueue` and `FMDatabasePool` share: the one way they open a connection, and the one
/// clean-up after a block.
extension FMDatabase {
    /// Opens a connection for a queue or a pool: in multi-thread mode (the owner hands it to one thread
    /// at a time), keyed and verified with `keyProvider` when there is one. A connection that cannot be
    /// keyed is closed before the error is thrown.
    static func openShared(
        path: String?,
        flags: Int32,
        vfs: String?,
        keyProvider: (any KeyProvider)?,
        logger: Logger,
        logsErrors: Bool = true
    ) throws -> FMDatabase {
        let db = FMDatabase(path: path)
        db.logger = logger
        db.logsErrors = logsErrors
        // The throwing open: the caller gets its error (the queue or pool logs it when nobody else does).
        try db.recording { try db.openConnection(flags: multiThreadFlags(flags), vfs: vfs) }
        if let keyProvider {
            do {
                try db.setKey(using: keyProvider)
            } catch {
                db.close()
                throw error
            }
        }
        return db
    }

    /// After a queue or pool block: closes the result sets it left open (not the reusable ones from
    /// `prepare(_:)`, which live until their own `close()`) and rolls back a transaction it left open,
    /// logging a warning for each, so the next block starts clean. `owner` names the caller in the log.
    func cleanUpAfterBlock(owner: String) {
        if closeTransientResultSets() > 0 {
            logger.warning("Warning: there is at least one open result set around after performing [\(owner) inDatabase:]")
        }
        if isInTransaction {
            logger.warning("\(owner): a block left a transaction open; it was rolled back.")
            rollback()
        }
    }

    /// A handle another thread may use to interrupt this connection; nil when closed.
    var interruptHandle: InterruptHandle? { connection?.interruptHandle }
}
