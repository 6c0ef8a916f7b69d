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
            // A header of 96 bytes or more leaves SQLite's whole header in the clear: page 1 tells. Read only
            // for a file whose reserved bytes are SQLCipher's (a plaintext file seldom reserves any).
            if let pageSize = sqlcipherReservePageSize(Array(head)),
                let (page, _) = readStart(ofFileAt: path, count: pageSize), page.count == pageSize,
                let size = plaintextHeaderSize(ofPageOne: Array(page))
            {
                return .encryptedWithPlaintextHeader(size: size)
            }
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
        // Bytes 72..<80 zero and 80..<92 not: the clear part ends at 80.
        return head[72..<80].contains(where: { $0 != 0 }) ? 64 : 80
    }

    /// The page size of a file whose SQLite header is whole and sane and whose reserved bytes per page (byte
    /// 20) are a SQLCipher reserve — the IV and the HMAC, a multiple of its 16-byte block — or nil. Only such
    /// a file may be an encrypted one whose plaintext header (96 bytes or more) covers SQLite's whole header.
    static func sqlcipherReservePageSize(_ head: [UInt8]) -> Int? {
        guard head.count == 100 else { return nil }
        let raw = Int(head[16]) << 8 | Int(head[17])
        let pageSize = raw == 1 ? 65_536 : raw
        let reserve = Int(head[20])
        guard (512...65_536).contains(pageSize), pageSize & (pageSize - 1) == 0, reserve > 0, reserve % 16 == 0
        else { return nil }
        return pageSize
    }

    /// The size of the plaintext header of a file whose SQLite header (its first 100 bytes) is in the clear,
    /// read from page 1 (`page`, one whole page), or nil when page 1 reads as SQLite's. SQLCipher ends every
    /// page with its IV (random) in the reserved bytes, where SQLite itself writes nothing; only a page 1
    /// with something there is looked at further. It is encrypted when it is not a b-tree page (type 0x0D or
    /// 0x05) with a consistent header, cell pointers and cells (sqlite_master's records, 5 columns each), or,
    /// with no cells, when its free space is not zero. The size is where the clear part stops reading as
    /// SQLite's: the first non-zero 16-byte block of the free space between the cell pointers and the cells
    /// (SQLite leaves it zero in a page it wrote whole), or else the offset where the page stops making sense,
    /// in 16-byte steps from 96 (SQLite's header ends at 100; smaller sizes are told by the header itself).
    /// SQLCipher takes no plaintext header over 1,024 bytes: a page that would have a larger one is plaintext.
    static func plaintextHeaderSize(ofPageOne page: [UInt8]) -> Int? {
        guard let size = plaintextHeaderEstimate(ofPageOne: page), size <= 1024 else { return nil }
        return size
    }

    private static func plaintextHeaderEstimate(ofPageOne page: [UInt8]) -> Int? {
        let reserve = Int(page[20])
        let usable = page.count - reserve
        guard page[usable...].contains(where: { $0 != 0 }) else { return nil }
        func u16(_ at: Int) -> Int { Int(page[at]) << 8 | Int(page[at + 1]) }
        func floor16(_ offset: Int) -> Int { max(96, offset / 16 * 16) }
        let kind = page[100]
        guard kind == 0x0D || kind == 0x05 else { return 96 }
        let headerEnd = 100 + (kind == 0x0D ? 8 : 12)
        let cells = u16(103)
        let rawStart = u16(105)
        let contentStart = rawStart == 0 ? 65_536 : rawStart
        let pointersEnd = headerEnd + 2 * cells
        guard pointersEnd <= contentStart, contentStart <= usable else { return 96 }
        for index in 0..<cells {
            let at = headerEnd + 2 * index
            let cell = u16(at)
            guard cell >= contentStart, cell < usable else { return floor16(at) }
        }
        // The first 16-byte block of the free space with anything but zeros in it: ciphertext, once the page
        // is known not to read as SQLite's.
        var block = (pointersEnd + 15) / 16 * 16
        var ciphertextStart: Int?
        while block + 16 <= contentStart {
            if page[block..<(block + 16)].contains(where: { $0 != 0 }) {
                ciphertextStart = block
                break
            }
            block += 16
        }
        guard cells > 0 else { return ciphertextStart }
        // The in-header page count holds only when the change counter (24) and its version-valid-for copy (92)
        // agree, as SQLite reads it; otherwise it is not used.
        let pages = page[24..<28] == page[92..<96] ? Int(page[28]) << 24 | Int(page[29]) << 16 | u16(30) : 0
        for index in 0..<cells {
            let cell = u16(headerEnd + 2 * index)
            let readable: Bool
            if kind == 0x0D {
                readable = isSchemaRecord(page, at: cell, end: usable)
            } else {
                let child = cell + 4 <= usable ? Int(page[cell]) << 24 | Int(page[cell + 1]) << 16 | u16(cell + 2) : 0
                readable = child >= 1 && (pages == 0 || child <= pages)
            }
            guard readable else { return ciphertextStart ?? floor16(contentStart) }
        }
        return nil
    }

    /// Whether the leaf cell at `offset` of page 1 reads as a row of sqlite_master whose record lies within the
    /// page: a payload size, a rowid, and a record header of 5 serial types (type, name and tbl_name as text,
    /// rootpage an integer, sql text or NULL) whose sizes add up to the payload.
    static func isSchemaRecord(_ page: [UInt8], at offset: Int, end: Int) -> Bool {
        var position = offset
        func varint() -> Int? {
            var value = 0
            for index in 0..<9 {
                guard position < end else { return nil }
                let byte = Int(page[position])
                position += 1
                if index == 8 { return value << 8 | byte }
                value = value << 7 | (byte & 0x7F)
                if byte < 0x80 { return value }
            }
            return nil
        }
        guard let payload = varint(), payload > 0, varint() != nil else { return false }
        let recordStart = position
        guard let headerSize = varint(), headerSize >= 6, headerSize <= payload else { return false }
        var types: [Int] = []
        while position < recordStart + headerSize {
            guard let type = varint() else { return false }
            types.append(type)
        }
        guard types.count == 5, position == recordStart + headerSize else { return false }
        func isText(_ type: Int) -> Bool { type >= 13 && type % 2 == 1 }
        guard isText(types[0]), isText(types[1]), isText(types[2]), (0...9).contains(types[3]) && types[3] != 7,
            isText(types[4]) || types[4] == 0
        else { return false }
        let sizes = [0, 1, 2, 3, 4, 6, 8, 8, 0, 0]
        let body = types.reduce(0) { sum, type in sum + (type >= 12 ? (type - 12) / 2 : sizes[type]) }
        return headerSize + body == payload
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
