@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A key in SQL text never reaches an error or a log line, whatever its spelling: generated `ATTACH ... KEY`
/// and key PRAGMA statements (every value form SQLite accepts, schema qualifiers in every quoting, comments
/// and odd white space between every token, mixed case), each holding a unique marker as its key, run
/// through the library's real paths; the marker must appear in no error text and no log line.
final class KeyRedactionFuzzTests: FMDBCipherTestCase {
    /// SplitMix64: the same cases on every run.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
        mutating func chance(_ oneIn: Int) -> Bool { below(oneIn) == 0 }

        /// `word` in a random mix of upper and lower case.
        mutating func cased(_ word: String) -> String {
            switch below(3) {
            case 0: return word.lowercased()
            case 1: return word.uppercased()
            default: return String(word.map { below(2) == 0 ? Character($0.uppercased()) : $0 })
            }
        }

        /// What may separate two tokens: white space of every kind SQLite skips, and comments (one holding a
        /// `;` and a quote, which must not end the statement or open a literal).
        mutating func gap(required: Bool = true) -> String {
            let gaps = [
                " ", "  ", "\t", "\n", "\r\n", "\u{0C}", "/**/", "/* c */", " /* ; ' \" */ ", "-- c\n", "--;'\n",
                " \t/*\n*/ ", " \u{FEFF}",
            ]
            return !required && chance(2) ? "" : pick(gaps)
        }
    }

    /// One generated statement and the marker its key holds.
    struct Case {
        let sql: String
        let marker: String
    }

    /// The marker spelled as a key value in one of the forms SQLite accepts (or nearly accepts) after
    /// `KEY` or `=`: `numeric` markers are digits, others letters and digits.
    static func value(_ marker: String, numeric: Bool, inAttach: Bool, _ g: inout Generator) -> String {
        if numeric { return g.pick([marker, "-" + marker, "+" + marker, marker + ".5", "(" + marker + ")"]) }
        var forms = [
            "'\(marker)'", "\"\(marker)\"", marker, "x'\(marker)'", "\"x'\(marker)'\"", "'\(marker)''s'",
        ]
        if inAttach {
            forms += [
                "(('\(marker)'))", "+'\(marker)'", "trim('\(marker)')", "CAST('\(marker)' AS TEXT)",
                "'\(marker)' || 'tail'", "'a'||\(g.gap(required: false))'\(marker)'", "upper(\(marker))",
                "[\(marker)]", "`\(marker)`", "-'\(marker)'", "char(65) || '\(marker)'",
                "CASE WHEN 1 THEN '\(marker)' END", "(SELECT '\(marker)')", "coalesce(NULL, '\(marker)')",
            ]
        }
        return g.pick(forms)
    }

    static func attach(_ marker: String, numeric: Bool, directory: String, _ g: inout Generator) -> String {
        let file = g.pick([
            "':memory:'", "''", "\":memory:\"", "'\(directory)/a.db'", "(':memory:')", "':mem' || 'ory:'",
            "'\(directory)/missing/a.db'", "\"\(directory)/x.db\"", "bareFileName",
        ])
        let schema = g.pick(["s", "\"my db\"", "[s x]", "`s`", "'s'", "aux1", "key"])
        var tokens = [g.cased("attach")]
        if g.chance(2) { tokens.append(g.cased("database")) }
        tokens += [file, g.cased("as"), schema, g.cased("key"), value(marker, numeric: numeric, inAttach: true, &g)]
        // A bare name is a file in the working directory: such an ATTACH ends in a word SQLite rejects.
        if file == "bareFileName" { tokens.append("oops") }
        return tokens.map { $0 + g.gap() }.joined()
    }

    static func pragma(_ marker: String, numeric: Bool, _ g: inout Generator) -> String {
        let name = g.cased(g.pick(["key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey"]))
        let quoted = g.pick([name, "\"\(name)\"", "[\(name)]", "`\(name)`", "'\(name)'"])
        var text = g.cased("pragma") + g.gap()
        if g.chance(2) {
            let schema = g.pick(["main", "\"my db\"", "[x]", "`x`", "MAIN", "'main'", "temp", "\"main\""])
            text += schema + g.gap(required: false) + "." + g.gap(required: false)
        }
        text += quoted
        let value = value(marker, numeric: numeric, inAttach: false, &g)
        switch g.below(3) {
        case 0: text += g.gap(required: false) + "=" + g.gap(required: false) + value
        case 1: text += g.gap(required: false) + "(" + g.gap(required: false) + value + g.gap(required: false) + ")"
        default: text += g.gap() + "=" + g.gap() + value + g.gap()
        }
        return text
    }

    /// `count` statements, each an ATTACH or a key PRAGMA, sometimes after EXPLAIN, sometimes among other
    /// statements, sometimes broken (a trailing word, an unterminated literal) so that SQLite rejects it.
    static func cases(count: Int, seed: UInt64, directory: String) -> [Case] {
        var g = Generator(state: seed)
        return (0..<count).map { index in
            let numeric = g.chance(5)
            let marker = numeric ? "97531\(index + 100_000)" : "Mk\(index)Zq"
            var sql =
                g.chance(2)
                ? attach(marker, numeric: numeric, directory: directory, &g) : pragma(marker, numeric: numeric, &g)
            if g.chance(6) {
                sql = g.cased(g.pick(["explain ", "explain query plan "])) + g.gap(required: false) + sql
            }
            switch g.below(8) {
            case 0: sql += " oops"
            case 1: sql += " '"
            case 2: sql += "/* open"
            case 3: sql = "SELECT 1;" + g.gap(required: false) + sql
            case 4: sql += ";" + g.gap(required: false) + "SELECT 2"
            default: break
            }
            return Case(sql: sql, marker: marker)
        }
    }

    /// Every text a failure or a success could show: the log (trace and error lines), the last error in all
    /// its forms, and `thrown`'s.
    static func texts(_ db: FMDatabase, _ capture: LogCapture, thrown: Error?) -> [String] {
        var texts = capture.all + [db.lastErrorMessage()]
        for error in [db.lastError() as NSError] + (thrown.map { [$0 as NSError] } ?? []) {
            texts += ["\(error)", error.description, error.localizedDescription]
            texts += error.userInfo.values.map { "\($0)" }
        }
        return texts
    }

    /// Runs `sql` through one of the library's entry points (`form`), on `db`, logging into a new capture.
    static func run(_ sql: String, form: Int, on db: FMDatabase) -> [String] {
        let capture = LogCapture()
        db.logger = capture.logger()
        db.traceExecution = true
        db.logsErrors = true
        var thrown: Error?
        switch form {
        case 0: _ = db.executeUpdate(sql)
        case 1:
            if let rs = db.executeQuery(sql) {
                while rs.next() {}
                rs.close()
            }
        case 2: _ = db.executeStatements(sql)
        case 3:
            do { try db.execute(sql) } catch { thrown = error }
        case 4:
            do { try db.executeScript(sql) { rs in while try rs.nextWithError() {} } } catch { thrown = error }
        default:
            do {
                let rs = try db.executeQuery(sql, values: nil)
                while try rs.nextWithError() {}
                rs.close()
            } catch { thrown = error }
        }
        return texts(db, capture, thrown: thrown)
    }

    func testGeneratedKeySpellingsNeverReachAnErrorOrALogLine() throws {
        let started = Date()
        let cases = Self.cases(count: 3000, seed: 0x5EC2_E7, directory: directory.path(""))
        // A connection keyed by the API (a raw key: no key derivation), on which SQL text may not key: the
        // statements that compile are refused by the key guard; and fresh unkeyed connections, on which
        // `PRAGMA key` and `ATTACH ... KEY` run.
        let keyedPath = try makeKeyedDatabase("keyed.db", provider: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        let keyed = FMDatabase(path: keyedPath)
        XCTAssertTrue(keyed.open())
        try keyed.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        defer { keyed.close() }
        var leaks: [String] = []
        var shownPlaceholder = 0
        for (index, item) in cases.enumerated() {
            let fresh = index % 4 == 0 ? FMDatabase(path: nil) : nil
            if let fresh { XCTAssertTrue(fresh.open()) }
            let texts = Self.run(item.sql, form: index % 6, on: fresh ?? keyed)
            fresh?.close()
            if let leaked = texts.first(where: { $0.contains(item.marker) }) {
                leaks.append("\(item.sql.debugDescription) -> \(leaked.debugDescription)")
            } else if !SQLRedaction.mayHoldKey(item.sql) {
                // Not shown this time (no path printed it), but it would be.
                leaks.append("\(item.sql.debugDescription) -> not hidden")
            }
            if texts.contains(where: { $0.contains("(SQL that may hold a key, not shown)") }) { shownPlaceholder += 1 }
        }
        XCTAssertEqual(leaks.count, 0, "keys shown, e.g.:\n" + leaks.prefix(12).joined(separator: "\n"))
        // The trace line shows every statement (the placeholder for these): the paths above were exercised.
        XCTAssertEqual(shownPlaceholder, cases.count)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "the fuzz test stays fast")
    }

    /// Generated ordinary SQL (a column, table or schema named `key`, PRAGMAs whose name only looks like a key
    /// PRAGMA, comments and literals holding `;`) is shown as it is.
    func testGeneratedOrdinarySQLIsShown() {
        var g = Generator(state: 0x0D_1A_2B)
        for _ in 0..<1000 {
            let key = g.pick(["key", "KEY", "\"key\"", "[key]", "`key`", "Key"])
            var sql = g.pick([
                "SELECT \(key) FROM t WHERE \(key) = 'secret;'",
                "INSERT INTO t (\(key))\(g.gap())VALUES ('k; PRAGMA key = 1')",
                "UPDATE t SET \(key) = x'00' WHERE \(key) = 'a'",
                "PRAGMA \(g.pick(["main", key, "\"my db\""]))\(g.gap(required: false)).\(g.gap(required: false))"
                    + g.pick(["keys", "key_size", "cipher_salt", "user_version", "table_info"]) + " = 1",
                "CREATE TABLE \(key) (\(key) TEXT PRIMARY KEY)", "ATTACH DATABASE 'keys.db' AS \(key)",
                "DETACH \(key)", "SELECT 'ATTACH x AS y KEY z'",
            ])
            sql = g.cased(g.pick(["", "explain ", "select 1;"])) + g.gap(required: false) + sql
            XCTAssertFalse(SQLRedaction.mayHoldKey(sql), sql)
        }
    }

    /// The tokenizer ends statements where SQLite does: at each `;` it reads as a token, SQLite's own
    /// `sqlite3_complete` says the text up to it is complete; a `;` inside a literal leaves it incomplete,
    /// and one inside a comment changes nothing (a comment is white space).
    func testStatementsEndWhereSQLiteEndsThem() {
        func complete(_ bytes: ArraySlice<UInt8>) -> Bool {
            sqlite3_complete(String(decoding: bytes, as: UTF8.self)) != 0
        }
        for item in Self.cases(count: 600, seed: 0xC0_FFEE, directory: "/d") {
            let bytes = Array(item.sql.utf8)
            for token in SQLTokenizer(bytes) {
                for offset in token.range where bytes[offset] == UInt8(ascii: ";") {
                    let prefix = bytes[...offset]
                    let expected =
                        switch token.kind {
                        case .semicolon: true
                        // Cut inside a block comment, the prefix holds an unterminated comment: incomplete.
                        case .space:
                            bytes[token.range.lowerBound] == UInt8(ascii: "-")
                                && complete(bytes[..<token.range.lowerBound])
                        default: false
                        }
                    XCTAssertEqual(
                        complete(prefix), expected, "\(String(decoding: prefix, as: UTF8.self).debugDescription)")
                }
            }
        }
    }

    /// Each spelling of the issue that the old deny-list showed, as a direct check of the rule.
    func testEverySpellingSQLiteAcceptsIsHidden() {
        for sql in [
            "ATTACH 'x.db' AS x KEY hunter2", "ATTACH 'x.db' AS x KEY 71331", "ATTACH 'x.db' AS x KEY (('k'))",
            "ATTACH 'x.db' AS x KEY +'k'", "ATTACH 'x.db' AS x KEY trim('k')",
            "ATTACH 'x.db' AS x KEY CAST('k' AS TEXT)",
            "PRAGMA \"my db\".key = k", "PRAGMA [my db] . /* ; */ 'rekey' (k)", "explain PRAGMA `KEY`=-5",
            "ATTACH 'file:x.db?key=k' AS x", "ATTACH 'FILE:x.db?%6Bey=k' AS x", "ATTACH 'file:x.db?' || 'k' AS x",
            "SELECT 1; ATTACH 'x' AS y /* ; */ KEY k", "SELECT 'a;b'; PRAGMA hexkey = \"x'00'\"",
            "SELECT 'unterminated; PRAGMA key = k", "PRAGMA cipher_license = 'k'",
            "PRAGMA main.CIPHER_ADD_RANDOM = \"x'0011'\"",
            // A byte-order mark before a token is white space to newer SQLite (and part of a word to older).
            "\u{FEFF}PRAGMA key='k'", "PRAGMA \u{FEFF}key='k'", "PRAGMA main.\u{FEFF}key='k'",
            "SELECT 1;\u{FEFF}PRAGMA rekey='k'", "EXPLAIN \u{FEFF}PRAGMA key='k'", "\u{FEFF}ATTACH 'a.db' AS y KEY 'k'",
            // VACUUM INTO a URI whose key parameter SQLCipher 4 keys the copy with.
            "VACUUM INTO 'file:out.db?key=k'", "VACUUM main INTO 'FILE:out.db?hexkey=00'", "VACUUM INTO 'f' || 'k'",
            // Statements SQLite refuses, and quotes, with a key PRAGMA or ATTACH inside.
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN ATTACH 'x' AS y KEY 'k'; END",
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN PRAGMA key='k'; END", "EXPLAIN EXPLAIN PRAGMA key='k'",
            "SELECT 1 PRAGMA key='k'",
        ] {
            XCTAssertTrue(SQLRedaction.mayHoldKey(sql), sql)
            XCTAssertEqual(FMDatabaseError.loggable(sql), "(SQL that may hold a key, not shown)", sql)
        }
    }

    /// Ordinary SQL is shown whole, in the error and the log: a failing statement names itself, a column
    /// named `key` included, and so do a plain ATTACH and the other PRAGMAs.
    func testOrdinarySQLErrorsStillShowTheirSQL() throws {
        for sql in [
            "SELECT * FROM missing WHERE key = 'x'", "INSERT INTO missing (key) VALUES ('k')",
            "ATTACH DATABASE '\(directory.path("missing"))/a.db' AS other", "PRAGMA cipher_salt = \"x'00'\" oops",
            "PRAGMA main.keys = 1 oops", "SELECT 'key' FROM missing", "UPDATE missing SET keyed = 1",
            "SELECT \"unterminated FROM missing", "VACUUM INTO '\(directory.path("missing"))/copy.db'",
            "PRAGMA foreign_keys = ON oops",
        ] {
            let capture = LogCapture()
            let db = FMDatabase(path: directory.path("plain.db"))
            db.logger = capture.logger()
            XCTAssertTrue(db.open())
            XCTAssertFalse(db.executeUpdate(sql), sql)
            let error = db.lastError() as NSError
            XCTAssertEqual(error.userInfo["sql"] as? String, sql)
            XCTAssertTrue("\(error)".contains(sql), "\(error)")
            XCTAssertFalse(error.localizedDescription.contains("may hold a key"), error.localizedDescription)
            XCTAssertTrue(capture.all.contains("error DB Query: \(sql)"), "\(capture.all)")
            db.close()
        }
    }

    /// A `file:` URI may carry a key as its `key` parameter (SQLCipher 4 keys the file with it; whether the
    /// running SQLCipher did is read from the file's first bytes): the log lines that name the database show
    /// the URI without its query, and an ATTACH of such a URI is hidden.
    func testAKeyInAURIPathOrAnAttachedURIIsNotLogged() throws {
        let marker = "UriKeyMarker7"
        let capture = LogCapture()
        let db = FMDatabase(path: "file:\(directory.path("u.db"))?key=\(marker)")
        db.logger = capture.logger()
        db.traceExecution = true
        XCTAssertTrue(db.open(withFlags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, vfs: nil))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"), db.lastErrorMessage())
        XCTAssertFalse(db.executeUpdate("INSERT INTO missing VALUES (1)"))
        let attached = directory.path("a.db")
        XCTAssertTrue(db.executeUpdate("ATTACH 'file:\(attached)?key=\(marker)' AS a"), db.lastErrorMessage())
        XCTAssertTrue(db.executeUpdate("CREATE TABLE a.t (a)"), db.lastErrorMessage())
        XCTAssertFalse(db.executeUpdate("ATTACH 'file:\(attached)?key=\(marker)' AS a"), "already attached")
        db.close()
        let header = { (path: String) in (try? Data(contentsOf: URL(fileURLWithPath: path)).prefix(15)) ?? Data() }
        let keyedByURI = header(directory.path("u.db")) != Data("SQLite format 3".utf8)
        XCTAssertEqual(header(attached) != Data("SQLite format 3".utf8), keyedByURI, "both or neither keyed by URI")
        XCTAssertTrue(capture.all.contains { $0.contains("u.db?(query not shown) ") }, "\(capture.all)")
        XCTAssertTrue(capture.all.contains { $0.contains("DB Path: file:\(directory.path("u.db"))?(query not shown)") })
        for line in capture.all { XCTAssertFalse(line.contains(marker), line) }
    }

    /// The tool's `sql` command prints the library's errors: a key in the SQL it ran is not among them.
    func testTheToolsSQLCommandShowsNoKeyInItsErrors() throws {
        let database = path("tool.db")
        try runTool(["sql", database, "CREATE TABLE t (a)", "--key-env", "K", "--create"], env: ["K": "tool key"])
        for (sql, marker) in [
            ("ATTACH '\(directory.path("missing"))/x.db' AS x KEY ToolSecret1", "ToolSecret1"),
            ("PRAGMA \"my db\" . /**/ rekey = ToolSecret2 oops", "ToolSecret2"),
            ("SELECT 1; ATTACH ':memory:' AS m KEY trim('ToolSecret3", "ToolSecret3"),
        ] {
            let result = try runTool(["sql", database, sql, "--key-env", "K"], env: ["K": "tool key"])
            XCTAssertNotEqual(result.status, 0, sql)
            XCTAssertFalse(result.stderr.isEmpty, sql)
            XCTAssertFalse(result.stderr.contains(marker), result.stderr)
            XCTAssertFalse(result.stdout.contains(marker), result.stdout)
        }
        let plain = try runTool(["sql", database, "SELECT key FROM t", "--key-env", "K"], env: ["K": "tool key"])
        XCTAssertEqual(plain.status, 1)
        XCTAssertTrue(plain.stderr.contains("no such column: key"), plain.stderr)
    }
}
