import Foundation

/// What a program can do about an error a queue, a pool or a database call threw: the one way to decide
/// whether to retry.
///
/// ```swift
/// func withRetries<T: Sendable>(_ pool: FMDatabasePool, _ block: @escaping @Sendable (FMDatabase) throws -> T)
///     async throws -> T
/// {
///     var attempt = 0
///     while true {
///         do {
///             return try await pool.performTransaction(.immediate, block)
///         } catch {
///             attempt += 1
///             switch FMErrorDisposition(error) {
///             case .transient where attempt < 5:
///                 try await Task.sleep(for: .milliseconds(10 << attempt))
///             case .connectionReplaced where attempt < 2:
///                 continue
///             default:
///                 throw error
///             }
///         }
///     }
/// }
/// ```
///
/// A block the library stopped is never run again by the library: whether to run it again is the caller's
/// decision, which this answers for the errors the library knows. A transaction's block is safe to run again
/// after any of these errors, whatever it writes: none of its transaction was committed. A block outside a
/// transaction (`perform`, `inDatabase`) committed each statement that succeeded before the error, as SQLite
/// does: run it again only if running it twice does no harm.
///
/// - Note: FMDB compatibility: an addition.
public enum FMErrorDisposition: Sendable, Hashable, CustomStringConvertible {
    /// Another connection or process held a lock (`SQLITE_BUSY`, `SQLITE_PROTOCOL`), or a pool transaction
    /// waited longer than its `transactionQueueTimeout` (`SQLITE_BUSY`): run the block again after a short
    /// wait, a bounded number of times. (`SQLITE_LOCKED` is a conflict inside the connection itself, such as
    /// dropping a table a pending statement reads, without a shared cache: permanent.)
    case transient
    /// The block's connection met the file under a key changed elsewhere (another process's rekey), or could
    /// no longer read it: the block was stopped and its connection replaced. Run it again once; a second
    /// failure of this kind means the key changed again (or the new key does not open the file).
    case connectionReplaced
    /// The task was cancelled (`CancellationError`), or the statement interrupted (`SQLITE_INTERRUPT`,
    /// ``FMDatabase/interrupt()``): nothing to retry.
    case cancelled
    /// Anything else: an SQL or constraint error, a wrong key at open, a full disk, an I/O error, damage, a
    /// misuse. Running the block again gives the same error.
    case permanent

    /// The disposition of `error`. A transaction that SQLite rolled back
    /// (``FMDatabaseError/transactionWasRolledBack``) has the disposition of the statement's failure that
    /// made it roll back.
    public init(_ error: any Error) {
        if error is CancellationError {
            self = .cancelled
            return
        }
        if let error = error as? FMDatabaseError, error.marked(.connectionReplaced) {
            self = .connectionReplaced
            return
        }
        guard let code = FMResultCode(error) else {
            self = .permanent
            return
        }
        switch code {
        case .busy, FMResultCode(rawValue: SQLITE_PROTOCOL): self = .transient
        case .interrupted: self = .cancelled
        default: self = .permanent
        }
    }

    /// The case's name.
    public var description: String {
        switch self {
        case .transient: return "transient"
        case .connectionReplaced: return "connectionReplaced"
        case .cancelled: return "cancelled"
        case .permanent: return "permanent"
        }
    }
}
