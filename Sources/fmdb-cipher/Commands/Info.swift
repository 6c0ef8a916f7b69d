import ArgumentParser
import FMDB
import Foundation

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show whether a database is encrypted, and with its key: cipher settings, journal mode, tables.",
        discussion: """
            Without a key option only the file's header is read (no key needed, no prompt), and the key \
            slots beside it, if any (ids, kinds, KDFs; never a secret), and why they are not used when the \
            slot file is one others can change or another user owns. With a key: the derivation the open \
            went through (key_derivation; kdf_iter only for a passphrase SQLCipher derives itself), whether \
            the settings were given or the format's defaults, and "open with:", the flags besides the key \
            that open the file (the file does not record them). A slotted database is opened through its \
            slots without --kdf. A key that does not open the file (tried with the format's defaults or the \
            settings given) exits 65 with a reminder that the file may need settings it does not record. The \
            file is read without leaving a -wal or -shm it did not find.

            Examples:
              fmdb-cipher info app.db
              DB_KEY=... fmdb-cipher info app.db --key-env DB_KEY --json
            """
    )

    @Argument(help: "The database file.") var database: String
    @OptionGroup var key: KeyOptions
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        // Without a key option info reads the header only and never prompts: a slot id there opens nothing.
        if key.slotID != nil, key.source == nil { throw KeyOptions.slotWithoutKey }
    }

    func run() throws {
        try runReportingErrors {
            let kind = try DatabaseFiles.requireInput(database)
            var info: [String: Any] = [
                "path": database,
                "size": DatabaseFiles.fileSize(database),
                "encrypted": kind.isEncrypted,
            ]
            let header: String
            switch kind {
            case .plaintext: header = "plaintext SQLite database"
            case .empty: header = "empty file (a new database)"
            case .truncated: header = "not a database (too short)"
            case .encryptedWithPlaintextHeader(let size):
                header = FileKind.plaintextHeaderDescription(size)
                info["plaintext_header_size"] = size
            default: header = "encrypted (or not a database): no SQLite header"
            }
            info["header"] = header
            var lines = ["file: \(database)", "size: \(DatabaseFiles.fileSize(database)) bytes", "header: \(header)"]
            // The slot file is read without a key: ids, kinds and KDFs, never a secret.
            if SlotDiscovery.hasSlotFile(database) {
                let slotPath = KeySlots.slotFilePath(forDatabaseAt: database)
                do {
                    let slots = try KeySlots.list(forDatabaseAt: database)
                    info["key_slots"] = slots.map {
                        ["id": $0.id, "kind": $0.kind.rawValue, "kdf": $0.kdf] as [String: Any]
                    }
                    lines.append("key slots: \(slotPath)")
                    if let reason = SlotDiscovery.distrust(database) {
                        info["key_slots_not_used"] = reason
                        lines.append("  not used to open the database: \(reason)")
                    }
                    lines += RowFormat.table(
                        columns: ["id", "kind", "kdf"], rows: slots.map { [String($0.id), $0.kind.rawValue, $0.kdf] }
                    ).map { "  " + $0 }
                } catch {
                    let reason = (error as NSError).localizedDescription
                    info["key_slots_error"] = reason
                    lines.append("key slots: \(slotPath): cannot be read: \(reason)")
                }
            }

            if key.source != nil || kind == .plaintext {
                var kdf = key.kdf
                let provider: (any KeyProvider)? = try key.source.map {
                    let material = try KeyReader().read($0, what: "key for \(database)")
                    let opening = try key.opening(database, with: material)
                    kdf = opening.kdf
                    return opening.provider
                }
                let db: FMDatabase
                do {
                    db = try DatabaseFiles.open(database, provider: provider, settings: key.settings, readOnly: true)
                } catch let error as CLIError where error.code == Exit.unsupportedFormat {
                    // The key is right and the file is SQLCipher 4, which the linked 3.x cannot read: say so.
                    info["format"] = CipherFormat.v4.description
                    lines.append(
                        "format: \(CipherFormat.v4) (cannot be read by the linked SQLCipher "
                            + "\(FMDBCipherVersion.sqlcipher))"
                    )
                    if json { try Output.json(info) } else { lines.forEach(Output.line) }
                    throw error
                } catch let error as CLIError where error.code == Exit.wrongKey && !kdf.opensSlot && error.hintsKey {
                    // Tried with the format's defaults (or the settings given): a right key under settings the
                    // file does not record reads as a wrong one.
                    throw CLIError(
                        error.message
                            + "; or the file needs settings it does not record (--kdf, --cipher-page-size, --kdf-iter: "
                            + "the ones said when it was written)", code: Exit.wrongKey)
                }
                defer { db.close() }
                var details: [String: Any] = [:]
                if provider != nil {
                    details["format"] = db.cipherFormat?.description ?? ""
                    details["cipher_version"] = db.cipherVersion ?? ""
                    let pageSize = Int(db.int(forQuery: "PRAGMA cipher_page_size"))
                    details["cipher_page_size"] = pageSize
                    details["kdf"] = kdf.rawValue
                    // SQLCipher's kdf_iter is the derivation only for a passphrase it derives itself; every
                    // other kind reaches SQLCipher as a raw key, and the PRAGMA's value is then unused.
                    let iterations = kdf == .passphrase ? Int(db.int(forQuery: "PRAGMA kdf_iter")) : nil
                    if let iterations { details["kdf_iter"] = iterations }
                    let format = db.cipherFormat ?? .linkedDefault
                    details["key_derivation"] = OpeningFlags.derivation(kdf, format: format, iterations: iterations)
                    details["cipher"] = db.string(forQuery: "PRAGMA cipher") ?? ""
                    let flags =
                        OpeningFlags.needed(kdf: kdf, format: format, pageSize: pageSize, iterations: iterations)
                        + OpeningFlags.choices(key.settings)
                    details["open_with"] = flags
                    details["settings"] =
                        key.cipherPageSize != nil || key.kdfIterations != nil
                            || !OpeningFlags.choices(key.settings).isEmpty
                        ? "as given (not recorded in the file)" : "\(format)'s defaults"
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
                    "format", "cipher_version", "cipher", "cipher_page_size", "kdf", "key_derivation", "kdf_iter",
                    "settings", "page_size", "journal_mode", "user_version", "application_id",
                ] {
                    if let value = details[name] { lines.append("\(name): \(value)") }
                }
                if let flags = details["open_with"] as? [String] {
                    lines.append("open with: " + (flags.isEmpty ? "(the key alone)" : flags.joined(separator: " ")))
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
