import Foundation
import Hummingbird

/// A note as the API returns it and as a row of the `notes` table reads it (Codable rows: the property names
/// are the column names).
public struct Note: Codable, Sendable, Equatable, ResponseCodable {
    public var id: Int64
    public var title: String
    public var body: String
    /// Seconds since 1970, as the table stores it.
    public var created: Date
}

/// What a client posts to create a note.
public struct NewNote: Codable, Sendable {
    public var title: String
    public var body: String

    public init(title: String, body: String) {
        self.title = title
        self.body = body
    }
}

/// The service's health, as `GET /health` returns it.
public struct Health: Codable, Sendable, ResponseCodable {
    public var status: String
    /// Connections the pool holds now, idle and in use.
    public var openConnections: Int
    /// Connections in use by running requests.
    public var connectionsInUse: Int
    /// Key reloads (SIGHUP) that handed the pool a new key since the start.
    public var keyReloads: Int
}
