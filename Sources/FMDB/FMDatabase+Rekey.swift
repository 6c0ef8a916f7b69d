import Foundation

/// The queue's and pool's safe rekey.
extension FMDatabase {
    /// The queue's and pool's rekey: rekey this connection, verify the new key on a fresh connection,
    /// then checkpoint the WAL (TRUNCATE). Throws, leaving the old key in force, when any step fails
    /// before the rekey took; after it took, a failed verification is reported but cannot be undone.
    func rekeySafely(using provider: any KeyProvider, path: String?, flags: Int32, vfs: String?) throws {
        let savedTimeout = maxBusyRetryTimeInterval
        if savedTimeout < 5 { maxBusyRetryTimeInterval = 5 }
        defer { maxBusyRetryTimeInterval = savedTimeout }
        try rekey(using: provider)
        if let path, isFileBacked {
            let fresh = FMDatabase(path: path)
            fresh.logger = logger
            guard fresh.open(withFlags: flags & ~SQLITE_OPEN_CREATE, vfs: vfs) else { throw fresh.lastError() }
            defer { fresh.close() }
            try fresh.setKey(using: provider)
        }
        if (try? connection?.pragmaText("PRAGMA journal_mode")) == "wal" {
            try checkpoint(.truncate, name: nil, logFrameCount: nil, checkpointCount: nil)
        }
    }
}
