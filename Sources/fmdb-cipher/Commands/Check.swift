import ArgumentParser
import FMDB
import Foundation

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Open a database with its key and run PRAGMA integrity_check; exit 2 on any problem.",
        discussion: """
            The file is opened read-only, unless a journal or WAL beside it may need recovery (after a crash): \
            then read-write, so SQLite rolls the interrupted transaction back first (said on standard error). \
            A journal or WAL that another process holds locked is its live transaction, not a crash's: the file \
            is then checked read-only, as that process has committed it (a note says so).

            PRAGMA cipher_integrity_check (page HMACs) runs too where the linked SQLCipher has it (4.x); \
            SQLCipher 3.4.1 checks every page's HMAC as integrity_check reads it. A format without page HMACs \
            (SQLCipher 1's, cipher_use_hmac = OFF) has nothing for it to check: "integrity checked by SQLite; \
            SQLCipher's page check is not available for this format" (standard error), and the exit is \
            integrity_check's.

            Examples:
              DB_KEY=... fmdb-cipher check app.db --key-env DB_KEY && echo healthy
              fmdb-cipher check app.db --key-file key.txt --json
            """
    )

    @Argument(help: "The database file.") var database: String
    @OptionGroup var key: KeyOptions
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try runReportingErrors {
            let kind = try DatabaseFiles.requireInput(database)
            let provider: (any KeyProvider)? =
                kind == .plaintext && key.source == nil
                ? nil
                : try key.provider(opening: database, with: KeyReader().read(key.source, what: "key for \(database)"))
            // A journal or WAL left by a crash (a killed rekey, say) must be rolled back before the file can be
            // read, which a read-only connection cannot do: then open read-write, so SQLite recovers it first.
            // A journal or WAL that another process holds locked is its live transaction, not a crash's: the check
            // reads what it has committed, read-only.
            let sideFile = InputFiles.mayNeedRecovery(database)
            let inUse = sideFile && InputFiles.lockedByAnotherProcess(database)
            let recover = sideFile && !inUse
            if inUse {
                Output.message(
                    "fmdb-cipher: note: another process is using \(database) (its journal or WAL is in use): "
                        + "checking what it has committed")
            }
            if recover {
                Output.message(
                    "fmdb-cipher: \(database) has a journal or WAL beside it (an interrupted write?); "
                        + "opening it read-write so SQLite can recover it before the check")
            }
            let db = try DatabaseFiles.open(database, provider: provider, settings: key.settings, readOnly: !recover)
            defer { db.close() }
            // SQLCipher 4 first: PRAGMA cipher_integrity_check reads every page itself and answers one row per page
            // whose HMAC fails ("HMAC verification failed for page N"), none when every page passes. It runs before
            // integrity_check, whose read of a failing page can leave the connection answering SQLITE_ERROR.
            // SQLCipher 3.4.1 does not know the pragma; it checks every page's HMAC as integrity_check reads it.
            var cipherCheck = "not available in SQLCipher \(db.cipherVersion ?? "?")"
            var problems: [String] = []
            var declined = false
            if provider != nil, CipherFormat.v4.isSupportedByLinkedSQLCipher, Self.walKeepsFrames(db, database) {
                // cipher_integrity_check reads the main file only, never the WAL: pages still in the WAL (after a
                // rekey whose checkpoint is pending, every page, under the new key) would read as failures.
                cipherCheck = "skipped: another connection keeps pages in the WAL (integrity_check reads them)"
            } else if provider != nil, CipherFormat.v4.isSupportedByLinkedSQLCipher {
                let lines: [String]?
                do {
                    lines = try DatabaseFiles.cipherIntegrityCheck(db)
                } catch {
                    throw CLIError.fromOpened(error, context: database, keyed: true)
                }
                if let lines {
                    cipherCheck = lines.isEmpty ? "ok" : "failed"
                    problems = lines
                } else {
                    // A format without per-page HMACs (SQLCipher 1's, cipher_use_hmac = OFF): SQLCipher declines
                    // to check it, which is no damage; SQLite's integrity_check below still decides.
                    cipherCheck = "not available for this format"
                    declined = true
                }
            }
            do {
                problems += try DatabaseFiles.integrityCheck(db)
            } catch {
                // Pages that failed their HMAC already explain any error integrity_check then meets (on 4.6.1 a
                // plain SQLITE_ERROR): damage, exit 2, not an error of the tool's own.
                if FMResultCode.corrupt ~= error || FMResultCode.notADatabase ~= error {
                    problems.append(CLIError.fromOpened(error, context: "integrity_check", keyed: true).message)
                } else if !problems.isEmpty {
                    problems.append(
                        "integrity_check: stopped (\((error as NSError).localizedDescription)) after the pages above "
                            + "failed their HMAC check"
                    )
                } else {
                    throw CLIError.from(error, context: database)
                }
            }
            try Output.report(
                CheckReport(path: database, problems: problems, cipherIntegrityCheck: cipherCheck), json: json)
            if declined {
                Output.message(
                    "fmdb-cipher: \(database): integrity checked by SQLite; SQLCipher's page check is not available "
                        + "for this format")
            }
            if !problems.isEmpty { throw ExitCode(Exit.integrity) }
        }
    }

    /// Whether the WAL beside `path` still holds frames after a checkpoint was tried (another process reading
    /// keeps them there). The checkpoint itself only moves committed pages into the main file, as SQLite does
    /// when the last connection closes.
    static func walKeepsFrames(_ db: FMDatabase, _ path: String) -> Bool {
        guard let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int, size > 0
        else {
            return false
        }
        var frames: Int32 = 0
        var copied: Int32 = 0
        guard (try? db.checkpoint(.truncate, name: nil, logFrameCount: &frames, checkpointCount: &copied)) != nil else {
            return true
        }
        return copied < frames
    }
}
