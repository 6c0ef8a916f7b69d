import Foundation

/// What the first bytes of a database file say, read without SQLite (no key needed).
enum DatabaseFile {
    /// Whether `head` is "SQLite format 3\0", the header of every plaintext SQLite file. (Compared with
    /// a static string rather than a global Data: LeakSanitizer cannot follow Swift's packed pointers in
    /// a global Data and would report it at exit.)
    static func isPlaintextHeader(_ head: Data) -> Bool {
        let header: StaticString = "SQLite format 3\u{0}"
        return header.withUTF8Buffer { head.elementsEqual($0) }
    }

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

    /// Reads the first 16 bytes with open(2)/read(2): this runs at every keyed open, so it stays cheap.
    static func kind(atPath path: String) -> Kind {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .empty }
        defer { close(fd) }
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
