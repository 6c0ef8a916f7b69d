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
            var report = InfoReport(path: database, size: DatabaseFiles.fileSize(database), kind: kind)
            if SlotDiscovery.hasSlotFile(database) { addKeySlots(to: &report) }
            if key.source != nil || kind == .plaintext { try addOpened(to: &report) }
            try Output.report(report, json: json)
        }
    }

    /// The slots beside the database, read without a key: ids, kinds and KDFs, never a secret; or why the slot
    /// file cannot be read.
    private func addKeySlots(to report: inout InfoReport) {
        report.slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        do {
            report.keySlots = try KeySlots.list(forDatabaseAt: database).map {
                InfoReport.Slot(id: $0.id, kind: $0.kind.rawValue, kdf: $0.kdf)
            }
            report.keySlotsNotUsed = SlotDiscovery.distrust(database)
        } catch {
            report.keySlotsError = (error as NSError).localizedDescription
        }
    }

    /// What opening the database with the key given (none for a plaintext database) finds. A SQLCipher 4 file the
    /// linked 3.x cannot read (the key is right) is reported as far as it is known, then the error is thrown.
    private func addOpened(to report: inout InfoReport) throws {
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
            report.format = CipherFormat.v4.description
            report.formatUnreadableBy = FMDBCipherVersion.sqlcipher
            try Output.report(report, json: json)
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
        if provider != nil {
            report.format = db.cipherFormat?.description ?? ""
            report.cipherVersion = db.cipherVersion ?? ""
            let pageSize = Int(db.int(forQuery: "PRAGMA cipher_page_size"))
            report.cipherPageSize = pageSize
            report.kdf = kdf.rawValue
            // SQLCipher's kdf_iter is the derivation only for a passphrase it derives itself; every
            // other kind reaches SQLCipher as a raw key, and the PRAGMA's value is then unused.
            let iterations = kdf == .passphrase ? Int(db.int(forQuery: "PRAGMA kdf_iter")) : nil
            report.kdfIter = iterations
            let format = db.cipherFormat ?? .linkedDefault
            report.keyDerivation = OpeningFlags.derivation(kdf, format: format, iterations: iterations)
            report.cipher = db.string(forQuery: "PRAGMA cipher") ?? ""
            report.openWith =
                OpeningFlags.needed(kdf: kdf, format: format, pageSize: pageSize, iterations: iterations)
                + OpeningFlags.choices(key.settings)
            report.settings =
                key.cipherPageSize != nil || key.kdfIterations != nil || !OpeningFlags.choices(key.settings).isEmpty
                ? "as given (not recorded in the file)" : "\(format)'s defaults"
        }
        report.pageSize = Int(db.int(forQuery: "PRAGMA page_size"))
        report.journalMode = db.string(forQuery: "PRAGMA journal_mode") ?? ""
        report.userVersion = Int(db.userVersion)
        report.applicationID = Int(db.applicationID)
        do {
            report.tables = try DatabaseFiles.tableCounts(db).map { InfoReport.Table(name: $0.0, rows: $0.1) }
        } catch {
            throw CLIError.fromOpened(error, context: database, keyed: provider != nil, db: db)
        }
    }
}
