import Foundation

/// What a rekey that did not throw did: the new key is in force in both cases.
///
/// A rekey call has exactly three outcomes, which never overlap:
/// - it **throws**: not done, the old key still opens the database (or, code 11 `SQLITE_CORRUPT`, neither
///   key does: restore a backup);
/// - it returns `.done`: only the new key opens the database, and nothing is left to do;
/// - it returns `.checkpointPending(error)`: only the new key opens the database, but the WAL
///   checkpoint that moves every page out of the `-wal` file could not run (another connection was
///   reading, say); until a later checkpoint the main file still holds pages under the old key.
///
/// ```swift
/// switch try queue.rekey(using: newProvider) {
/// case .done: print("rekeyed")
/// case .checkpointPending(let error): print("rekeyed; checkpoint pending: \(error.message)")
/// }
/// ```
///
/// - Note: FMDB compatibility: an addition; FMDB's `rekey:` returns a Bool.
public enum FMRekeyOutcome: Equatable, Sendable {
    /// The new key is in force, verified on a fresh connection, and the WAL (if any) was checkpointed.
    case done
    /// The new key is in force and verified, but the WAL checkpoint failed with `error` (usually
    /// `SQLITE_BUSY`): SQLite checkpoints again when the last connection closes, or call
    /// `checkpoint(.truncate)` later.
    case checkpointPending(FMDatabaseError)
}
