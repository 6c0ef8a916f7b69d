import CSQLCipher
import Foundation

/// What a path holds and what the first bytes of a database file say, read without a key (through SQLite's
/// VFS, never a descriptor of our own: see `readStart`).
enum DatabaseFile {
    /// Whether `head` is "SQLite format 3\0", the header of every plaintext SQLite file. (Compared with
    /// a static string rather than a global Data: LeakSanitizer cannot follow Swift's packed pointers in
    /// a global Data and would report it at exit.)
    static func isPlaintextHeader(_ head: Data) -> Bool {
        let header: StaticString = "SQLite format 3\u{0}"
        return header.withUTF8Buffer { head.elementsEqual($0) }
    }

    enum Kind: Equatable {
        /// Nothing at the path.
        case missing
        /// A directory.
        case directory
        /// Something other than a regular file or directory: a FIFO, a device, a socket.
        case notRegularFile
        /// A file this process may not read.
        case unreadable
        /// A file of zero bytes: a new database.
        case empty
        /// A plaintext SQLite file.
        case plaintext
        /// Anything else with at least 16 bytes: an encrypted file (its first 16 bytes are the salt), or
        /// not a database at all.
        case encrypted(salt: Data)
        /// A SQLCipher file whose first `size` bytes SQLCipher keeps unencrypted
        /// (`cipher_plaintext_header_size`, as iOS apps in shared containers write): it starts as a plaintext
        /// file does, but what follows is ciphertext. Its salt is not in the file.
        case encryptedWithPlaintextHeader(size: Int)
        /// A file too short to hold a header.
        case truncated

        /// No database there yet: SQLite creates it at the first write.
        var isNew: Bool { self == .missing || self == .empty }
    }

    /// Reads the first 100 bytes (the SQLite header): this runs at every keyed open, so it stays cheap. The
    /// path is classified with stat(2) first (no descriptor), so a FIFO never blocks the caller; a regular
    /// file's bytes are read through SQLite (`readStart`), never through a descriptor of our own.
    static func kind(atPath path: String) -> Kind {
        var info = stat()
        guard stat(path, &info) == 0 else {
            switch errno {
            case ENOENT, ENOTDIR: return .missing
            default: return .unreadable
            }
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return .directory
        default: return .notRegularFile
        }
        guard let (head, _) = readStart(ofFileAt: path, count: 100) else { return .unreadable }
        if head.isEmpty { return .empty }
        if isPlaintextHeader(head.prefix(16)) {
            if let size = plaintextHeaderSize(Array(head)) { return .encryptedWithPlaintextHeader(size: size) }
            return .plaintext
        }
        if head.count < 16 { return .truncated }
        return .encrypted(salt: head.prefix(16))
    }

    /// How many bytes of a file that starts with SQLite's magic SQLCipher kept unencrypted, or nil when the
    /// whole header reads as a plaintext SQLite file's. SQLite requires bytes 72..<92 of the header to be
    /// zero ("reserved for expansion"); ciphertext there means an encrypted file with a plaintext header.
    /// The size is where the header stops making sense, in SQLCipher's 16-byte steps: bytes 16..<24 (page
    /// size, versions, payload fractions 64/32/32), the schema format at 44 (1-4), the text encoding at 56
    /// (1-3); 32 for the files iOS apps write.
    static func plaintextHeaderSize(_ head: [UInt8]) -> Int? {
        guard head.count == 100, head[72..<92].contains(where: { $0 != 0 }) else { return nil }
        func number(at offset: Int) -> Int {
            head[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
        }
        let pageSize = Int(head[16]) << 8 | Int(head[17])
        let sane =
            (pageSize == 1 || (512...32_768).contains(pageSize) && pageSize & (pageSize - 1) == 0)
            && (1...2).contains(head[18]) && (1...2).contains(head[19]) && head[21] == 64 && head[22] == 32
            && head[23] == 32
        guard sane else { return 16 }
        guard (1...4).contains(number(at: 44)) else { return 32 }
        guard (1...3).contains(number(at: 56)) else { return 48 }
        return 64
    }

    /// Up to `count` bytes from the start of the regular file at `path`, and its size; nil when it cannot be
    /// opened for reading.
    ///
    /// Read through SQLite's own VFS (a read-only connection without a key, which reads no page), not
    /// with open(2)/close(2): closing any descriptor of a file drops every POSIX advisory lock the process
    /// holds on it (fcntl(2)), among them the SHARED lock each WAL-mode connection keeps on the database
    /// file. Without those, another process's last connection gets its EXCLUSIVE lock at close, takes
    /// itself for the only one, and checkpoints and resets the WAL under this process's connections, which
    /// then fail with SQLITE_IOERR_SHORT_READ (a pool opening a connection while an operator's tool
    /// closed its own did exactly that). SQLite's unix VFS keeps the descriptor of a file this process holds
    /// locks on open until they are released.
    ///
    /// Related SQLite documentation:
    /// <https://www.sqlite.org/howtocorrupt.html#_posix_advisory_locks_canceled_by_a_separate_thread_doing_close_>
    static func readStart(ofFileAt path: String, count: Int) -> (bytes: Data, size: Int64)? {
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let db else {
            return nil
        }
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
            let file, let methods = file.pointee.pMethods, let fileSize = methods.pointee.xFileSize,
            let readBytes = methods.pointee.xRead
        else {
            return nil
        }
        var size: sqlite3_int64 = 0
        guard fileSize(file, &size) == SQLITE_OK else { return nil }
        let available = Int(min(Int64(count), max(0, size)))
        var bytes = Data(count: available)
        guard available > 0 else { return (bytes, size) }
        let rc = bytes.withUnsafeMutableBytes { buffer in readBytes(file, buffer.baseAddress, Int32(available), 0) }
        guard rc == SQLITE_OK else { return nil }
        return (bytes, size)
    }
}

extension DatabaseFile {
    /// Whether the filesystem holding `path` has less free space than the file's size: a rekey rewrites
    /// every page through a journal (or the WAL), which needs about that much. (statvfs(2), no SQLite.)
    static func lacksSpaceToRewrite(_ path: String) -> Bool {
        lacksSpace(toCopy: path, into: path)
    }

    /// Whether the filesystem holding `destination` has less free space than the file at `source` (and
    /// its WAL) occupies: a copy of it cannot fit. (stat(2) and statvfs(2), no SQLite.)
    static func lacksSpace(toCopy source: String, into destination: String) -> Bool {
        var fs = statvfs()
        guard statvfs(destination, &fs) == 0 else { return false }
        var needed: UInt64 = 0
        for path in [source, source + "-wal"] {
            var info = stat()
            if stat(path, &info) == 0 { needed += UInt64(max(info.st_size, 0)) }
        }
        let free = UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
        return needed > 0 && free < needed
    }
}
