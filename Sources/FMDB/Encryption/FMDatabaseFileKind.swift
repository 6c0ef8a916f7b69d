import Foundation

/// What is at a database path, read without SQLite and without a key: `FMDatabase.inspectFile(atPath:)`.
///
/// ```swift
/// switch FMDatabase.inspectFile(atPath: path) {
/// case .plaintext: print("a plaintext SQLite database")
/// case .encryptedWithPlaintextHeader(let size): print("encrypted, with a plaintext header of \(size) bytes")
/// case .encrypted: print("encrypted (or not a database at all): needs a key to tell")
/// case .missing, .empty: print("no database yet")
/// default: print("not a database file")
/// }
/// ```
///
/// New cases may be added (for example, which SQLCipher format a file uses): switch with a `default`.
///
/// Related SQLite documentation: <https://www.sqlite.org/fileformat.html#the_database_header>
public enum FMDatabaseFileKind: Equatable, Sendable {
    /// Nothing at the path.
    case missing
    /// A directory.
    case directory
    /// Something other than a regular file: a FIFO, a device, a socket. (Never opened for reading, so
    /// a FIFO does not block the caller.)
    case notRegularFile
    /// A file this process may not read (permission denied).
    case unreadable
    /// A file of zero bytes: SQLite (and SQLCipher) treat it as a new, empty database.
    case empty
    /// A plaintext SQLite database: its first 16 bytes are "SQLite format 3\0".
    case plaintext
    /// At least 16 bytes without the plaintext header: a SQLCipher database, whose first 16 bytes are
    /// its KDF salt — or a file that is not a database at all (only a key can tell).
    case encrypted(salt: Data)
    /// A SQLCipher database with a plaintext header: its first `size` bytes are unencrypted
    /// (`cipher_plaintext_header_size`; 32 as iOS apps in shared app-group containers write), so it starts
    /// as a plaintext SQLite file does, but the rest is encrypted. It does not hold its salt: open it with
    /// `CipherSettings(plaintextHeaderSize:salt:)` (SQLCipher 4). A header of 96 bytes or more holds SQLite's
    /// whole header in the clear; such a file is told from a plaintext one by page 1, which it holds as
    /// ciphertext after the header, with SQLCipher's IV in the bytes each page reserves (a plaintext
    /// database's page 1 reads as SQLite's). `size` is where the clear part stops reading as SQLite's, in
    /// 16-byte steps.
    case encryptedWithPlaintextHeader(size: Int)
    /// Between 1 and 15 bytes: too short to be a database.
    case truncated
}
