import FMDB
import Foundation

/// The tool's version, and the linked SQLCipher's as `--version` and `info` say it.
enum FMDBCipherVersion {
    static let string = "1.0.0"
    static var sqlcipher: String {
        let db = FMDatabase()
        defer { db.close() }
        guard db.open() else { return "?" }
        return db.cipherVersion ?? "?"
    }
}
