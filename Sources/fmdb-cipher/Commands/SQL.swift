import ArgumentParser
import FMDB
import Foundation

struct SQL: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run SQL on an encrypted database and print the results.",
        discussion: """
            The SQL comes from the argument, or else from standard input (after the key line when \
            --key-stdin is given). Every statement runs in order; rows print as an aligned table (column widths \
            from the first 1000 rows), or as CSV (RFC 4180, a header line per statement), JSON (one array of \
            row objects, one object per line, for each statement that returns columns; several statements give \
            several arrays in a row, as sqlite3's .mode json does: jq reads them, jq -s joins them) or JSON \
            lines (one row object per line). Rows stream: memory does not grow with the number of rows.

            Values: NULL is empty in a table and CSV, null in JSON. A BLOB is SQLite's hex literal x'…' in every \
            format (in JSON, that text as a string): every byte is kept, and pasted back into SQL it is the same \
            BLOB. A TEXT value that reads x'…' prints the same way: no format tells the two apart (select \
            typeof(column) as well when that matters). (sqlite3's shell writes raw bytes in CSV and JSON, which \
            lose binary data; psql writes hex in every format too.)

            DATABASE must exist: a mistyped path is an error (exit 66), never a new file. --create makes a new \
            encrypted database (0600) when there is none, and when its settings are not its format's defaults \
            (--kdf, --cipher-page-size, --kdf-iter) says on standard error the flags that open it (--json stays \
            the rows' format: `info --json` gives them as open_with); --read-only opens it so no statement can change \
            it (a write, or a PRAGMA that would change the file, is an SQL error, exit 1; it leaves no -wal or \
            -shm it did not find). --output FILE \
            writes the rows to FILE instead of standard output: created 0600 in a private directory beside it, \
            no link followed, refused if it exists (exit 73) unless --force, and renamed into place only when \
            every statement ran.

            Examples:
              DB_KEY=... fmdb-cipher sql app.db "SELECT count(*) FROM users" --key-env DB_KEY --read-only
              fmdb-cipher sql new.db "CREATE TABLE t (a)" --key-env DB_KEY --create
              fmdb-cipher sql app.db --key-file key.txt --json < report.sql
              fmdb-cipher sql app.db "SELECT * FROM users" --key-env DB_KEY --csv --output users.csv
            """
    )

    @Argument(help: "The database file (it must exist unless --create).") var database: String
    @Argument(help: "The SQL to run (default: standard input).") var sql: String?
    @OptionGroup var key: KeyOptions
    @Flag(help: "Print CSV.") var csv = false
    @Flag(help: "Print JSON (one array of row objects per statement that returns columns).") var json = false
    @Flag(help: "Print JSON lines (one row object per line).") var jsonl = false
    @Flag(help: "Create DATABASE, encrypted (0600), when it does not exist.") var create = false
    @Flag(help: "Open DATABASE read-only: statements that would change it fail.") var readOnly = false
    @Option(
        help: ArgumentHelp(
            "Write the rows to FILE instead of standard output: created 0600, no link followed, in place only once "
                + "complete.",
            valueName: "FILE"))
    var output: String?
    @Flag(help: "With --output: replace FILE if it exists.") var force = false

    func validate() throws {
        if [csv, json, jsonl].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --csv, --json and --jsonl")
        }
        if create, readOnly {
            throw ValidationError("--create and --read-only exclude each other")
        }
        if force, output == nil {
            throw ValidationError("--force goes with --output")
        }
    }

    func run() throws {
        try runReportingErrors {
            try InputFiles.requireRegularFile(database)
            let kind = FileKind(path: database)
            if kind == .directory {
                throw CLIError("\(database): is a directory, not a database file", code: Exit.noInput)
            }
            if kind == .missing, !create {
                throw CLIError(
                    "\(database): no such file (--create makes a new encrypted database)", code: Exit.noInput)
            }
            let reader = KeyReader()
            let provider: (any KeyProvider)? =
                kind == .plaintext && key.source == nil
                ? nil
                : try key.provider(opening: database, with: reader.read(key.source, what: "key for \(database)"))
            let script: String
            if let sql {
                script = sql
            } else {
                // readToEnd, not readDataToEndOfFile, which traps on a read error (standard input a directory).
                let input: Data
                do {
                    input = try FileHandle.standardInput.readToEnd() ?? Data()
                } catch {
                    let reason =
                        ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)
                        .map { String(cString: strerror(Int32($0.code))) } ?? (error as NSError).localizedDescription
                    throw CLIError("cannot read the SQL from standard input: \(reason)", code: Exit.ioError)
                }
                // Not repaired: a byte that is not UTF-8 would otherwise become U+FFFD, and change the SQL.
                guard let text = String(bytes: input, encoding: .utf8) else {
                    throw CLIError.usage("the SQL on standard input is not valid UTF-8; nothing was run")
                }
                script = text
            }
            guard !script.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw CLIError.usage("no SQL given (as an argument or on standard input)")
            }
            // The library refuses it too (SQLITE_MISUSE, before any statement runs); said here as a usage error,
            // before the database is opened or created. (An argument cannot hold a NUL: standard input can.)
            if let nul = script.utf8.firstIndex(of: 0) {
                let offset = script.utf8.distance(from: script.utf8.startIndex, to: nul)
                throw CLIError.usage(
                    "the SQL holds a NUL byte (at byte \(offset)): SQLite would stop reading there and skip the "
                        + "statements after it; nothing was run")
            }
            let db: FMDatabase
            if kind == .missing {
                try DatabaseFiles.createEmptyDatabase(at: database)
                db = FMDatabase(path: database)
                DatabaseFiles.quiet(db)
                guard db.open() else { throw CLIError.from(db.lastError(), context: database) }
                if let provider {
                    WeakCipherWarning.warn(key.settings, file: database)
                    do {
                        try db.setKey(using: provider, settings: key.settings)
                    } catch {
                        // The empty file this run made goes again (a slotted key, say, refuses to create a database).
                        db.close()
                        if DatabaseFiles.fileSize(database) == 0 { unlink(database) }
                        throw CLIError.from(error, context: database)
                    }
                }
            } else {
                db = try DatabaseFiles.open(database, provider: provider, settings: key.settings, readOnly: readOnly)
            }
            defer { db.close() }
            // --output: the rows go to a new file in a private directory beside FILE, renamed into place only
            // when every statement ran; a failure leaves no FILE.
            let target = try output.map { try OutputFile($0, force: force, source: database) }
            let fd = target?.fd ?? STDOUT_FILENO
            // Rows stream through a 64 KiB buffer: memory does not grow with the number of rows.
            let writer = RowWriter(format: csv ? .csv : json ? .json : jsonl ? .jsonl : .table, fd: fd)
            do {
                try db.executeScript(script) { rs in try writer.write(rs) }
            } catch let error as CLIError {
                throw error
            } catch {
                try? writer.finish()
                let cli = CLIError.fromOpened(error, context: "SQL error", keyed: provider != nil, db: db)
                // A statement the library's key guard refused (SQLITE_AUTH) is an SQL error, not a missing input.
                // So is a write refused under --read-only: it is not an I/O error.
                let refused = FMResultCode.authorization ~= error || (readOnly && FMResultCode.readOnly ~= error)
                throw refused ? CLIError(cli.message, code: Exit.failure) : cli
            }
            try writer.finish()
            try target?.commit()
            // A new file whose settings are not its format's defaults: the flags that open it, said once.
            if kind == .missing { OpeningFlags.note(database, kdf: key.kdf, settings: key.settings) }
        }
    }
}
