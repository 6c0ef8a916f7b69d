import Foundation

/// What `KeySlots.list` tells about one slot: never a secret, never a wrapped key.
public struct KeySlotInfo: Sendable, Equatable, CustomStringConvertible {
    /// The slot's number, unique within the database.
    public let id: Int
    /// What opens it.
    public let kind: KeySlotKind
    /// When the slot was created (or last changed).
    public let created: Date
    /// Its key derivation, e.g. "scrypt N=32768 r=8 p=1", "pbkdf2-sha512 256000", "hmac-sha256".
    public let kdf: String

    /// "1 passphrase scrypt N=32768 r=8 p=1 2026-11-22T21:00:00Z".
    public var description: String {
        "\(id) \(kind.rawValue) \(kdf) \(ISO8601DateFormatter().string(from: created))"
    }
}
