import CSQLCipher

/// Facts about the linked SQLite library, read once per process.
enum SQLCipherRuntime {
    /// `PRAGMA cipher_version` on a scratch in-memory connection: nil when the linked library is not
    /// SQLCipher (a system libsqlite3 was linked instead, which must never happen).
    static let version: String? = {
        guard let connection = try? Connection.open(path: ":memory:", flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil) else {
            return nil
        }
        defer { try? connection.close() }
        return (try? connection.pragmaText("PRAGMA cipher_version")) ?? nil
    }()
}
