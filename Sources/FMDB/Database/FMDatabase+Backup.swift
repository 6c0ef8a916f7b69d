import Foundation

/// Online backup between two connections, refusing to mix encrypted and plaintext.
extension FMDatabase {
    /// Copies this database into `destination` with SQLite's online backup, page by page.
    ///
    /// Refused (SQLITE_MISUSE) unless both `main` databases are encrypted or both are plaintext, as SQLCipher
    /// says (a codec on the schema), however they were keyed: `setKey`, or `PRAGMA key` in SQL text. SQLCipher
    /// 3.4.1 copies an encrypted database into a plaintext one as **plaintext**, and a plaintext one into an
    /// encrypted one unencrypted. The copy is of `main` only: databases attached beside it do not count. Use
    /// `fmdb-cipher decrypt` / `encrypt` (or `attachDatabase` + `exportContents`) to change encryption. The raw
    /// `sqlite3_backup_*` C functions are not guarded: do not call them on encrypted databases.
    ///
    /// ```swift
    /// try db.backup(to: copy)   // both keyed
    /// ```
    /// Related SQLite documentation: <https://www.sqlite.org/backup.html>
    public func backup(to destination: FMDatabase) throws {
        try recording {
            let source = try requireConnection()
            guard let destinationConnection = destination.connection else { throw FMDatabaseError.closed() }
            switch (try source.isKeyed(schema: "main"), try destinationConnection.isKeyed(schema: "main")) {
            case (true, false):
                throw FMDatabaseError.misuse(
                    "Backing up an encrypted database into a plaintext one is refused: SQLCipher 3.4.1 would write it "
                        + "in plaintext. Use fmdb-cipher decrypt (sqlcipher_export) to decrypt on purpose."
                )
            case (false, true):
                throw FMDatabaseError.misuse(
                    "Backing up a plaintext database into an encrypted one is refused: SQLCipher 3.4.1 would not "
                        + "encrypt it. Use fmdb-cipher encrypt (sqlcipher_export)."
                )
            default:
                break
            }
            try source.backup(
                to: destinationConnection, maxBusyWaits: max(1, Int(maxBusyRetryTimeInterval.steps(of: 0.01))))
        }
    }
}
