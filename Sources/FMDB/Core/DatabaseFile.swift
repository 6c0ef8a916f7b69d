import Foundation

/// What a path holds and what the first bytes of a database file say, read without SQLite (no key
/// needed).
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
        /// A file too short to hold a header.
        case truncated

        /// No database there yet: SQLite creates it at the first write.
        var isNew: Bool { self == .missing || self == .empty }
    }

    /// Reads the first 16 bytes with open(2)/read(2): this runs at every keyed open, so it stays cheap.
    /// Opened non-blocking and checked with fstat(2) before reading, so a FIFO never blocks the caller.
    static func kind(atPath path: String) -> Kind {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            switch errno {
            case ENOENT, ENOTDIR: return .missing
            case ENXIO: return .notRegularFile  // a FIFO or socket with nobody on the other end
            default: return .unreadable
            }
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return .unreadable }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return .directory
        default: return .notRegularFile
        }
        var head = Data(count: 16)
        let count = head.withUnsafeMutableBytes { buffer -> Int in
            guard let base = buffer.baseAddress else { return 0 }
            var total = 0
            while total < 16 {
                let n = read(fd, base.advanced(by: total), 16 - total)
                if n <= 0 { break }
                total += n
            }
            return total
        }
        head.count = count
        if head.isEmpty { return .empty }
        if isPlaintextHeader(head) { return .plaintext }
        if head.count < 16 { return .truncated }
        return .encrypted(salt: head)
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
