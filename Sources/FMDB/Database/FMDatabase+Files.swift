import Foundation

extension FMDatabase {
    /// Tells what is at `path` without opening it with SQLite and without a key: missing, a directory,
    /// not a regular file, unreadable, empty, a plaintext database, an encrypted one (with its salt), or
    /// a file too short to be a database. Follows a symbolic link the caller named.
    ///
    /// ```swift
    /// if case .encrypted = FMDatabase.inspectFile(atPath: path) {
    ///     try db.setKey(using: provider)
    /// }
    /// ```
    /// - Note: FMDB compatibility: an addition; FMDB has no such call.
    public static func inspectFile(atPath path: String) -> FMDatabaseFileKind {
        switch DatabaseFile.kind(atPath: path) {
        case .missing: return .missing
        case .directory: return .directory
        case .notRegularFile: return .notRegularFile
        case .unreadable: return .unreadable
        case .empty: return .empty
        case .plaintext: return .plaintext
        case .encrypted(let salt): return .encrypted(salt: salt)
        case .truncated: return .truncated
        }
    }
}
