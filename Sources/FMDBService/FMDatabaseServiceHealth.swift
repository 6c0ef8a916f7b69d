/// What ``FMDatabaseService/checkHealth()`` found: the key in use opened the file and a read went through.
///
/// ```swift
/// let health = try await service.checkHealth()
/// print("database ok in \(health.duration)")
/// ```
public struct FMDatabaseServiceHealth: Sendable, Hashable {
    /// The rows of the database's schema table (tables, indexes, views, triggers) the check counted.
    public var schemaObjects: Int
    /// How long the check took, from the call to its answer (waiting for a connection included).
    public var duration: Duration

    /// A result with the values given.
    public init(schemaObjects: Int, duration: Duration) {
        self.schemaObjects = schemaObjects
        self.duration = duration
    }
}
