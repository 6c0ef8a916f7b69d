import ArgumentParser
import FMDB
import Foundation

struct SQL: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql",
        abstract: "Run SQL on an encrypted database and print the results.",
        discussion: """
            The SQL comes from the argument, or else from standard input (after the key line when \
            --key-stdin is given). Every statement runs in order; rows print as an aligned table, or as CSV \
            (RFC 4180, a header line per statement) or JSON (an array of row objects; BLOBs as base64).

            Examples:
              DB_KEY=... fmdb-cipher sql app.db "SELECT count(*) FROM users" --key-env DB_KEY
              fmdb-cipher sql app.db --key-file key.txt --json < report.sql
            """
    )

    @Argument(help: "The database file (created, encrypted, when it does not exist).") var database: String
    @Argument(help: "The SQL to run (default: standard input).") var sql: String?
    @OptionGroup var key: KeyOptions
    @Flag(help: "Print CSV.") var csv = false
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if csv && json { throw ValidationError("choose one of --csv and --json") }
    }

    func run() throws {
        try runReportingErrors {
            try InputFiles.requireRegularFile(database)
            let kind = FileKind(path: database)
            if kind == .directory { throw CLIError("\(database): is a directory, not a database file", code: Exit.noInput) }
            let reader = KeyReader()
            let provider: (any KeyProvider)? = kind == .plaintext && key.source == nil
                ? nil
                : try key.kdf.provider(reader.read(key.source, what: "key for \(database)"))
            let script: String
            if let sql {
                script = sql
            } else {
                script = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            }
            guard !script.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw CLIError.usage("no SQL given (as an argument or on standard input)")
            }
            let db: FMDatabase
            if kind == .missing {
                try PrivateOutput.createEmptyDatabase(at: database)
                db = FMDatabase(path: database)
                db.logsErrors = false
                guard db.open() else { throw CLIError.from(db.lastError(), context: database) }
                if let provider {
                    do { try db.setKey(using: provider, settings: key.settings) } catch { throw CLIError.from(error, context: database) }
                }
            } else {
                db = try DatabaseFiles.open(database, provider: provider, settings: key.settings)
            }
            defer { db.close() }
            var jsonRows: [[String: Any]] = []
            do {
                try db.executeScript(script) { rs in
                    let count = rs.columnCount
                    guard count > 0 else { return }
                    let columns = (0..<count).map { rs.columnName(for: $0) ?? "" }
                    var rows: [[CellValue]] = []
                    while try rs.nextWithError() { rows.append((0..<count).map { CellValue(rs, $0) }) }
                    if json {
                        for row in rows {
                            var object: [String: Any] = [:]
                            for (name, value) in zip(columns, row) { object[name] = value.json }
                            jsonRows.append(object)
                        }
                    } else if csv {
                        Output.line(columns.map(RowFormat.csvField).joined(separator: ","))
                        for row in rows { Output.line(row.map { RowFormat.csvField($0.display) }.joined(separator: ",")) }
                    } else {
                        RowFormat.table(columns: columns, rows: rows.map { $0.map(\.display) }).forEach(Output.line)
                    }
                }
            } catch {
                if json { try? Output.json(jsonRows) }
                throw CLIError.fromOpened(error, context: "SQL error", keyed: provider != nil, db: db)
            }
            if json { try Output.json(jsonRows) }
        }
    }
}
