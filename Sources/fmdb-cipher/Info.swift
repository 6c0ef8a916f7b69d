import ArgumentParser
import FMDB
import Foundation

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show whether a database is encrypted, and with its key: cipher settings, journal mode, tables.",
        discussion: """
            Without a key option only the file's header is read (no key needed, no prompt).

            Examples:
              fmdb-cipher info app.db
              DB_KEY=... fmdb-cipher info app.db --key-env DB_KEY --json
            """
    )

    @Argument(help: "The database file.") var database: String
    @OptionGroup var key: KeyOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try runReportingErrors {
            let kind = try DatabaseFiles.requireInput(database)
            var info: [String: Any] = [
                "path": database,
                "size": fileSize(database),
                "encrypted": kind.isEncrypted,
            ]
            let header: String
            switch kind {
            case .plaintext: header = "plaintext SQLite database"
            case .empty: header = "empty file (a new database)"
            case .truncated: header = "not a database (too short)"
            default: header = "encrypted (or not a database): no SQLite header"
            }
            info["header"] = header
            var lines = ["file: \(database)", "size: \(fileSize(database)) bytes", "header: \(header)"]

            if key.source != nil || kind == .plaintext {
                let provider: (any KeyProvider)? = try key.source.map {
                    try key.kdf.provider(KeyReader().read($0, what: "key for \(database)"))
                }
                let db: FMDatabase
                do {
                    db = try DatabaseFiles.open(database, provider: provider, settings: key.settings, readOnly: true)
                } catch let error as CLIError where error.code == Exit.unsupportedFormat {
                    // The key is right and the file is SQLCipher 4, which the linked 3.x cannot read: say so.
                    info["format"] = CipherFormat.v4.description
                    lines.append(
                        "format: \(CipherFormat.v4) (cannot be read by the linked SQLCipher \(FMDBCipherVersion.sqlcipher))"
                    )
                    if json { try Output.json(info) } else { lines.forEach(Output.line) }
                    throw error
                }
                defer { db.close() }
                var details: [String: Any] = [:]
                if provider != nil {
                    details["format"] = db.cipherFormat?.description ?? ""
                    details["cipher_version"] = db.cipherVersion ?? ""
                    details["cipher_page_size"] = Int(db.int(forQuery: "PRAGMA cipher_page_size"))
                    details["kdf_iter"] = Int(db.int(forQuery: "PRAGMA kdf_iter"))
                    details["kdf"] = key.kdf.rawValue
                    details["cipher"] = db.string(forQuery: "PRAGMA cipher") ?? ""
                }
                details["page_size"] = Int(db.int(forQuery: "PRAGMA page_size"))
                details["journal_mode"] = db.string(forQuery: "PRAGMA journal_mode") ?? ""
                details["user_version"] = Int(db.userVersion)
                details["application_id"] = Int(db.applicationID)
                let tables: [(String, Int64)]
                do {
                    tables = try DatabaseFiles.tableCounts(db)
                } catch {
                    throw CLIError.fromOpened(error, context: database, keyed: provider != nil, db: db)
                }
                details["tables"] = tables.map { ["name": $0.0, "rows": $0.1] as [String: Any] }
                info.merge(details) { _, new in new }
                for name in [
                    "format", "cipher_version", "cipher", "cipher_page_size", "kdf", "kdf_iter", "page_size",
                    "journal_mode", "user_version", "application_id",
                ] {
                    if let value = details[name] { lines.append("\(name): \(value)") }
                }
                lines.append("tables: \(tables.count)")
                lines += RowFormat.table(columns: ["table", "rows"], rows: tables.map { [$0.0, String($0.1)] }).map {
                    "  " + $0
                }
            }
            if json {
                try Output.json(info)
            } else {
                lines.forEach(Output.line)
            }
        }
    }
}
