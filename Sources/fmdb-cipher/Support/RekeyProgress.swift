import ArgumentParser
import FMDB
import Foundation

/// How far a rekey has got, from outside SQLCipher: it writes every page once, through the rollback journal
/// (each page's old content, before it changes it) or the WAL (the new pages), so their growth over the
/// database's size is the fraction done, read from the file sizes without a call into SQLite.
struct RekeyProgress: Sendable {
    let database: String
    let total: Double
    let journalAtStart: Int64
    let walAtStart: Int64

    init(_ database: String) {
        self.database = database
        total = max(Double(DatabaseFiles.fileSize(database)), 1)
        journalAtStart = DatabaseFiles.fileSize(database + "-journal")
        walAtStart = DatabaseFiles.fileSize(database + "-wal")
    }

    /// The fraction written so far, 0 to 0.99 (1 is said when the rekey is done).
    @Sendable func measure() -> Double? {
        let written =
            max(DatabaseFiles.fileSize(database + "-journal") - journalAtStart, 0)
            + max(DatabaseFiles.fileSize(database + "-wal") - walAtStart, 0)
        return min(Double(written) / total, 0.99)
    }
}
