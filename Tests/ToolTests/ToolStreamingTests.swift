import FMDB
import Foundation
import TestSupport
import XCTest

/// `sql` streams its rows: every format is correct on awkward values, and memory does not grow with the
/// number of rows (peak RSS compared at two sizes; speed is for Scripts, never a test).
final class ToolStreamingTests: ToolTestCase {
    /// A plaintext table `r` of `rows` rows: an integer, a float, text with commas and quotes, a NULL, a BLOB.
    func makeRows(_ name: String, rows: Int) throws -> String {
        let file = path(name)
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        XCTAssertTrue(
            db.executeStatements(
                """
                CREATE TABLE r (id INTEGER PRIMARY KEY, x REAL, s TEXT, n, b BLOB);
                WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < \(rows))
                INSERT INTO r SELECT i, i / 4.0, 'row ' || i || ', "quoted"' || printf('%.60c', 'x'), NULL, x'00ff10' \
                FROM c;
                """))
        db.close()
        return file
    }

    /// Peak RSS in KiB of one run of the tool, its output discarded (python's getrusage of its only child).
    func peakRSS(_ arguments: [String]) throws -> Int {
        let python = try XCTUnwrap(which("python3"))
        let driver = """
            import resource, subprocess, sys
            status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
            print(status, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """
        let result = try runProcess(python, ["-c", driver, tool] + arguments)
        let fields = result.stdout.split(separator: " ").map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        XCTAssertEqual(fields.first, 0, "\(arguments): \(result.stderr)")
        return try XCTUnwrap(fields.last ?? nil, result.stdout + result.stderr)
    }

    func testEveryFormatStreamsInMemoryIndependentOfTheRowCount() throws {
        let small = try makeRows("small.db", rows: 10_000)
        let large = try makeRows("large.db", rows: 100_000)
        for format in ["--csv", "--json", "--jsonl", "--table"] {
            let flag = format == "--table" ? [] : [format]
            let smallRSS = try peakRSS(["sql", small, "select * from r"] + flag)
            let largeRSS = try peakRSS(["sql", large, "select * from r"] + flag)
            // Ten times the rows (about 10 MB of output more); holding them would add tens of MiB.
            XCTAssertLessThan(
                largeRSS - smallRSS, 8 * 1024, "\(format): \(smallRSS) KiB at 10,000 rows, \(largeRSS) KiB at 100,000")
        }
    }

    func testCSVJSONAndJSONLinesHoldEveryRowExactly() throws {
        let file = try makeRows("rows.db", rows: 3_000)
        let csv = try run(["sql", file, "select * from r order by id", "--csv"])
        XCTAssertEqual(csv.status, 0, csv.stderr)
        let lines = csv.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 3_002, "a header, 3,000 rows and the final newline")
        XCTAssertEqual(lines[0], "id,x,s,n,b")
        XCTAssertEqual(lines[3], "3,0.75,\"row 3, \"\"quoted\"\"\(String(repeating: "x", count: 60))\",,x'00ff10'")

        let jsonl = try run(["sql", file, "select * from r order by id", "--jsonl"])
        XCTAssertEqual(jsonl.status, 0, jsonl.stderr)
        let objects = try jsonl.stdout.split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        XCTAssertEqual(objects.count, 3_000)
        XCTAssertEqual(objects[2]["id"] as? Int, 3)
        XCTAssertEqual(objects[2]["x"] as? Double, 0.75)
        XCTAssertEqual(objects[2]["s"] as? String, "row 3, \"quoted\"" + String(repeating: "x", count: 60))
        XCTAssertTrue(objects[2]["n"] is NSNull)
        XCTAssertEqual(objects[2]["b"] as? String, "x'00ff10'", "a BLOB is x'hex' in every format, as in CSV")

        let json = try run([
            "sql", file, "select * from r order by id; select char(1, 10, 34, 92) || '\u{E9}' as odd, 1 as odd2",
            "--json",
        ])
        XCTAssertEqual(json.status, 0, json.stderr)
        let arrays = try jsonArrays(json.stdout)
        XCTAssertEqual(arrays.map(\.count), [3_000, 1], "one array per statement")
        guard arrays.count == 2 else { return }
        XCTAssertEqual(arrays[0][2]["s"] as? String, objects[2]["s"] as? String)
        XCTAssertEqual(arrays[0][2]["b"] as? String, "x'00ff10'")
        XCTAssertEqual(
            arrays[1][0]["odd"] as? String, "\u{1}\n\"\\\u{E9}", "control characters, quotes and backslashes escaped")
        let empty = try run(["sql", file, "select * from r where 0", "--json"])
        XCTAssertEqual(
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(empty.stdout.utf8)) as? [Any], empty.stdout).count, 0)
        XCTAssertEqual(try run(["sql", file, "select 1", "--json", "--jsonl"]).status, 64)
    }

    func testJSONGivesOneArrayPerStatementThatReturnsColumns() throws {
        let file = try makeRows("rows.db", rows: 3)
        let result = try run([
            "sql", file,
            "select id from r order by id; update r set n = 1; select x'0102' as b where 0; select x'cafe' as b",
            "--json",
        ])
        XCTAssertEqual(result.status, 0, result.stderr)
        let arrays = try jsonArrays(result.stdout)
        XCTAssertEqual(arrays.map(\.count), [3, 0, 1], "the UPDATE returns no columns: no array")
        guard arrays.count == 3 else { return }
        XCTAssertEqual(arrays[0].map { $0["id"] as? Int }, [1, 2, 3])
        XCTAssertEqual(arrays[2][0]["b"] as? String, "x'cafe'")
        let csv = try run(["sql", file, "select x'cafe' as b", "--csv"])
        XCTAssertEqual(csv.stdout, "b\nx'cafe'\n", "the same BLOB rendering as JSON")
        let table = try run(["sql", file, "select x'cafe' as b"])
        XCTAssertEqual(table.stdout, "b\n-------\nx'cafe'\n")
    }

    func testATextThatReadsLikeABlobPrintsTheSameAndTheHelpSaysSo() throws {
        let file = try makeRows("rows.db", rows: 1)
        let query = "select x'cafe' as b, 'x''cafe''' as t, typeof(x'cafe') as bt, typeof('x''cafe''') as tt"
        let json = try run(["sql", file, query, "--jsonl"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(json.stdout, #"{"b":"x'cafe'","t":"x'cafe'","bt":"blob","tt":"text"}"# + "\n")
        let csv = try run(["sql", file, query, "--csv"])
        XCTAssertEqual(csv.stdout, "b,t,bt,tt\nx'cafe',x'cafe',blob,text\n")
        // The rule as documented: every byte kept, but no format tells such a text from a BLOB (typeof does).
        let help = try run(["sql", "--help"]).stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        XCTAssertFalse(help.contains("lossless"), help)
        XCTAssertTrue(help.contains("A TEXT value that reads x'…' prints the same way"), help)
        XCTAssertTrue(help.contains("typeof(column)"), help)
    }

    /// The JSON arrays `--json` printed, one per statement: each starts on a line of its own with `[`.
    private func jsonArrays(_ output: String) throws -> [[[String: Any]]] {
        var arrays: [String] = []
        for line in output.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("[") { arrays.append("") }
            if !arrays.isEmpty { arrays[arrays.count - 1] += line + "\n" }
        }
        return try arrays.map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [[String: Any]], $0)
        }
    }

    func testAnErrorMidStreamLeavesValidJSON() throws {
        let file = try makeRows("rows.db", rows: 10)
        // abs() of the smallest integer overflows on the last row, after nine rows were written.
        let result = try run([
            "sql", file,
            "select id, abs(case when id = 10 then -9223372036854775808 else id end) as a from r order by id",
            "--json",
        ])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("integer overflow"), result.stderr)
        let rows = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]], result.stdout)
        XCTAssertEqual(rows.count, 9)
    }

    func testTheTableSizesColumnsFromTheFirstRowsThenStreams() throws {
        let file = path("table.db")
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        XCTAssertTrue(
            db.executeStatements(
                """
                CREATE TABLE w (a TEXT, b TEXT);
                WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1500)
                INSERT INTO w SELECT CASE WHEN i = 1200 THEN 'a much longer cell' ELSE 'v' || (i % 10) END, 'z' FROM c;
                """))
        db.close()
        let result = try run(["sql", file, "select a, b from w"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 1_502)
        XCTAssertEqual(lines[0], "a   b")
        XCTAssertEqual(lines[1], "--  -")
        XCTAssertEqual(lines[2], "v1  z")
        XCTAssertEqual(lines[1_201], "a much longer cell  z", "a cell past the first 1000 rows is printed whole")
    }

    func testCopiesReportThroughputAndVerificationTimeOnStandardError() throws {
        let plain = try makeRows("rows.db", rows: 2_000)
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let runs: [[String]] = [
            ["encrypt", plain, path("e.db"), "--kdf", "raw", "--key-env", "K"],
            ["export", path("e.db"), path("x.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N"],
            ["decrypt", path("x.db"), path("d.db"), "--kdf", "raw", "--key-env", "N"],
        ]
        for arguments in runs {
            let result = try run(arguments, env: env)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(result.stdout, "", "standard output stays empty for scripts")
            let stats = try XCTUnwrap(result.stderr.split(separator: "\n").first { $0.contains("MB/s") }, result.stderr)
            XCTAssertTrue(stats.hasPrefix("\(arguments[0]): ") && stats.contains("verification"), String(stats))
        }
        let quiet = try run(
            ["decrypt", path("x.db"), path("q.db"), "--kdf", "raw", "--key-env", "N", "--quiet"], env: env)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(quiet.stderr, "", "--quiet: nothing")
    }
}
