import Foundation

/// Hooks for `FMDatabasePool`: a class conforms and sets itself as the pool's `delegate`.
///
/// - Note: FMDB compatibility: on Apple platforms the delegate is an `NSObject` whose methods are
///   found by `respondsToSelector:`; here it is a protocol with default implementations.
public protocol FMDatabasePoolDelegate: AnyObject {
    /// Asked each time a connection is about to be handed to a block; false closes and drops it
    /// (the block is then not called).
    func databasePool(_ pool: FMDatabasePool, shouldAddDatabaseToPool database: FMDatabase) -> Bool
    /// Told when a new connection joins the pool.
    func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase)
}

extension FMDatabasePoolDelegate {
    /// Default: every connection is accepted.
    @discardableResult
    public func databasePool(_ pool: FMDatabasePool, shouldAddDatabaseToPool database: FMDatabase) -> Bool { true }
    /// Default: nothing.
    public func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {}
}
