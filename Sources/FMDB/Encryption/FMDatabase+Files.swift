import Foundation

extension FMDatabase {
    /// Tells what is at `path` without a key and without reading a page: missing, a directory, not a
    /// regular file, unreadable, empty, a plaintext database, an encrypted one (with its salt), or a file
    /// too short to be a database. Follows a symbolic link the caller named. A regular file's first bytes
    /// are read through SQLite's file layer, never a descriptor of its own: closing one would drop every
    /// POSIX lock this process holds on the file, the WAL locks of its open connections included.
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
        case .encryptedWithPlaintextHeader(let size): return .encryptedWithPlaintextHeader(size: size)
        case .truncated: return .truncated
        }
    }
}
