import FMDB
import Foundation

/// What `info` says of a database: its file and header (read without a key), its key slots if it has a slot file,
/// and, opened with its key (or as a plaintext database), what the open found. With `--json` one object whose
/// members are the `CodingKeys` (a member not known is left out); the text says the same, a line each.
struct InfoReport: Report {
    /// A key slot as `info` lists it: never a secret.
    struct Slot: Encodable {
        let id: Int
        let kind: String
        let kdf: String
    }

    /// A table and how many rows it has.
    struct Table: Encodable {
        let name: String
        let rows: Int64
    }

    let path: String
    let size: Int64
    let encrypted: Bool
    let header: String
    let plaintextHeaderSize: Int?
    /// The slot file's path, said in the text only (`key_slots` lists the slots).
    var slotFile: String?
    var keySlots: [Slot]?
    var keySlotsNotUsed: String?
    var keySlotsError: String?
    var format: String?
    /// The linked SQLCipher's version, when it cannot read `format`: said in the text only.
    var formatUnreadableBy: String?
    var cipherVersion: String?
    var cipher: String?
    var cipherPageSize: Int?
    var kdf: String?
    var keyDerivation: String?
    var kdfIter: Int?
    var settings: String?
    var pageSize: Int?
    var journalMode: String?
    var userVersion: Int?
    var applicationID: Int?
    var openWith: [String]?
    var tables: [Table]?

    enum CodingKeys: String, CodingKey {
        case path, size, encrypted, header, format, cipher, kdf, settings, tables
        case plaintextHeaderSize = "plaintext_header_size"
        case keySlots = "key_slots"
        case keySlotsNotUsed = "key_slots_not_used"
        case keySlotsError = "key_slots_error"
        case cipherVersion = "cipher_version"
        case cipherPageSize = "cipher_page_size"
        case keyDerivation = "key_derivation"
        case kdfIter = "kdf_iter"
        case pageSize = "page_size"
        case journalMode = "journal_mode"
        case userVersion = "user_version"
        case applicationID = "application_id"
        case openWith = "open_with"
    }

    /// The report of the file at `path`, of `size` bytes, whose header reads as `kind`.
    init(path: String, size: Int64, kind: FileKind) {
        self.path = path
        self.size = size
        encrypted = kind.isEncrypted
        plaintextHeaderSize = kind.plaintextHeaderSize
        switch kind {
        case .plaintext: header = "plaintext SQLite database"
        case .empty: header = "empty file (a new database)"
        case .truncated: header = "not a database (too short)"
        case .encryptedWithPlaintextHeader(let size): header = FileKind.plaintextHeaderDescription(size)
        default: header = "encrypted (or not a database): no SQLite header"
        }
    }

    var lines: [String] {
        var lines = ["file: \(path)", "size: \(size) bytes", "header: \(header)"]
        if let slotFile, let keySlotsError {
            lines.append("key slots: \(slotFile): cannot be read: \(keySlotsError)")
        } else if let slotFile, let keySlots {
            lines.append("key slots: \(slotFile)")
            if let keySlotsNotUsed { lines.append("  not used to open the database: \(keySlotsNotUsed)") }
            lines += RowFormat.table(
                columns: ["id", "kind", "kdf"], rows: keySlots.map { [String($0.id), $0.kind, $0.kdf] }
            ).map { "  " + $0 }
        }
        if let format {
            let unreadable = formatUnreadableBy.map { " (cannot be read by the linked SQLCipher \($0))" } ?? ""
            lines.append("format: \(format)\(unreadable)")
        }
        let details: [(name: String, value: String?)] = [
            ("cipher_version", cipherVersion), ("cipher", cipher),
            ("cipher_page_size", cipherPageSize.map(String.init)),
            ("kdf", kdf), ("key_derivation", keyDerivation), ("kdf_iter", kdfIter.map(String.init)),
            ("settings", settings), ("page_size", pageSize.map(String.init)), ("journal_mode", journalMode),
            ("user_version", userVersion.map(String.init)), ("application_id", applicationID.map(String.init)),
        ]
        lines += details.compactMap { detail in detail.value.map { "\(detail.name): \($0)" } }
        if let openWith {
            lines.append("open with: " + (openWith.isEmpty ? "(the key alone)" : openWith.joined(separator: " ")))
        }
        if let tables {
            lines.append("tables: \(tables.count)")
            lines += RowFormat.table(columns: ["table", "rows"], rows: tables.map { [$0.name, String($0.rows)] }).map {
                "  " + $0
            }
        }
        return lines
    }
}
