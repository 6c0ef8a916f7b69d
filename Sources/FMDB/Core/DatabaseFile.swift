import Foundation

/// What the first bytes of a database file say, read without SQLite (no key needed).
enum DatabaseFile {
    /// "SQLite format 3\0": the header of every plaintext SQLite file.
    static let plaintextHeader = Data("SQLite format 3".utf8) + Data([0])

    enum Kind: Equatable {
        /// No file, or a file of zero bytes: a new database.
        case empty
        /// A plaintext SQLite file.
        case plaintext
        /// Anything else with at least 16 bytes: an encrypted file (its first 16 bytes are the salt), or
        /// not a database at all.
        case encrypted(salt: Data)
        /// A file too short to hold a header.
        case truncated
    }

    static func kind(atPath path: String) -> Kind {
        guard let handle = FileHandle(forReadingAtPath: path) else { return .empty }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 16)) ?? Data()
        if head.isEmpty { return .empty }
        if head == plaintextHeader { return .plaintext }
        if head.count < 16 { return .truncated }
        return .encrypted(salt: head)
    }
}
