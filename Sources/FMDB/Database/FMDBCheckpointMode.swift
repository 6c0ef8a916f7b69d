import Foundation

/// The modes of `sqlite3_wal_checkpoint_v2`.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>
public enum FMDBCheckpointMode: Int32, Sendable {
    /// `SQLITE_CHECKPOINT_PASSIVE`: checkpoint as many frames as possible without waiting for readers or writers.
    case passive = 0
    /// `SQLITE_CHECKPOINT_FULL`: wait for writers, then checkpoint every frame.
    case full = 1
    /// `SQLITE_CHECKPOINT_RESTART`: as `full`, then wait until readers are done so the next writer restarts the WAL.
    case restart = 2
    /// `SQLITE_CHECKPOINT_TRUNCATE`: as `restart`, and truncate the WAL file to zero bytes.
    case truncate = 3
}
