import Foundation
import Logging

/// What `FMDatabaseQueue` and `FMDatabasePool` share on a connection: the one way they open it, and the one
/// clean-up after a block.
extension FMDatabase {
    /// Opens a connection for a queue or a pool: in multi-thread mode (the owner hands it to one thread
    /// at a time), keyed and verified with `keyProvider` when there is one. A connection that cannot be
    /// keyed is closed before the error is thrown.
    ///
    /// When any step fails (open, keying, verification, `prepare`) on a database file that did not exist,
    /// what the open created is removed (`CreatedFiles`); a provider that keys only existing databases
    /// (``KeyProvider/requiresExistingDatabase``) is asked first, so it fails before any file is made.
    static func openShared(
        path: String?,
        flags: Int32,
        vfs: String?,
        keyProvider: (any KeyProvider)?,
        logger: Logger,
        logsErrors: Bool = true,
        busyTimeout: TimeInterval? = nil,
        prepare: (FMDatabase) throws -> Void = { _ in }
    ) throws -> FMDatabase {
        var created = CreatedFiles(databasePath: path)
        if created != nil, let keyProvider, keyProvider.requiresExistingDatabase {
            // A provider that keys only existing databases (key slots, also wrapped: reloadable, a systemd
            // credential) answers "no database here" now, before a file exists. (One asked to create this
            // path derives the key here once; it keeps it for the keying below.)
            _ = try keyProvider.key(for: KeyRequest(databasePath: path, salt: nil))
        }
        let db = FMDatabase(path: path)
        db.logger = logger
        db.logsErrors = logsErrors
        // Applied at the open: the key check waits as long.
        if let busyTimeout { db.maxBusyRetryTimeInterval = busyTimeout }
        do {
            // The throwing open: the caller gets its error (the queue or pool logs it when nobody else does).
            try db.recording { try db.openConnection(flags: multiThreadFlags(flags), vfs: vfs) }
            created?.noteOpened()
            if let keyProvider {
                try db.setKey(using: keyProvider)
                created?.noteOwnWrite()
            }
            try prepare(db)
        } catch {
            db.close()
            created?.removeCreated()
            throw error
        }
        return db
    }

    /// After a queue or pool block: closes the result sets it left open (not the reusable ones from
    /// `prepare(_:)`, which live until their own `close()`) and rolls back a transaction it left open,
    /// logging a warning for each, so the next block starts clean. `owner` names the caller in the log.
    func cleanUpAfterBlock(owner: String) {
        if closeTransientResultSets() > 0 {
            logger.warning(
                "Warning: there is at least one open result set around after performing [\(owner) inDatabase:]")
        }
        if isInTransaction {
            logger.warning("\(owner): a block left a transaction open; it was rolled back.")
            rollback()
        }
    }
}
