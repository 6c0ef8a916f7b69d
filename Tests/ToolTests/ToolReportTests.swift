import FMDB
import Foundation
import XCTest

/// `info`, `check` and `keys list` build one report and print it as text or, with `--json`, as JSON: the two
/// forms of the same command on the same file say the same things, member for line.
final class ToolReportTests: ToolTestCase {
    /// The text and the JSON of `arguments`, both run to `status`.
    private func bothForms(_ arguments: [String], env: [String: String] = [:], status: Int32 = 0) throws -> (
        lines: [String], json: Any
    ) {
        let text = try run(arguments, env: env)
        XCTAssertEqual(text.status, status, text.stderr)
        let json = try run(arguments + ["--json"], env: env)
        XCTAssertEqual(json.status, status, json.stderr)
        XCTAssertEqual(text.stderr, json.stderr, "the same messages whichever form is printed")
        let lines = text.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines.last, "", "the text ends with a newline")
        return (Array(lines.dropLast()), try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)))
    }

    /// The rows of an aligned table (`RowFormat`): after the header and its dashes, each row's cells.
    private func tableRows(_ lines: ArraySlice<String>) -> [[String]] {
        lines.dropFirst(2).map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
    }

    func testInfoTextSaysWhatItsJSONSays() throws {
        let source = try makePlaintext("src.db")
        let file = path("enc.db")
        let written = try run(
            ["encrypt", source, file, "--kdf", "raw", "--key-env", "K", "--new-cipher-page-size", "8192", "--quiet"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(written.status, 0, written.stderr)
        let (lines, json) = try bothForms(
            ["info", file, "--kdf", "raw", "--cipher-page-size", "8192", "--key-env", "K"], env: ["K": Self.rawKey])
        let info = try XCTUnwrap(json as? [String: Any])
        var expected = [
            "file: \(try XCTUnwrap(info["path"]))", "size: \(try XCTUnwrap(info["size"])) bytes",
            "header: \(try XCTUnwrap(info["header"]))",
        ]
        let details = [
            "format", "cipher_version", "cipher", "cipher_page_size", "kdf", "key_derivation", "kdf_iter", "settings",
            "page_size", "journal_mode", "user_version", "application_id",
        ]
        for name in details {
            if let value = info[name] { expected.append("\(name): \(value)") }
        }
        let openWith = try XCTUnwrap(info["open_with"] as? [String])
        XCTAssertEqual(openWith, ["--kdf", "raw", "--cipher-page-size", "8192"])
        expected.append("open with: " + openWith.joined(separator: " "))
        let tables = try XCTUnwrap(info["tables"] as? [[String: Any]])
        XCTAssertFalse(tables.isEmpty)
        expected.append("tables: \(tables.count)")
        XCTAssertEqual(Array(lines.prefix(expected.count)), expected)
        XCTAssertEqual(
            tableRows(lines.dropFirst(expected.count)),
            tables.map { ["\($0["name"] ?? "?")", "\($0["rows"] ?? "?")"] })
        XCTAssertEqual(info["cipher_page_size"] as? Int, 8192)
        XCTAssertEqual(info["kdf"] as? String, "raw")
    }

    func testInfoOfASlottedDatabaseWithoutAKeyListsTheSameSlotsInBothForms() throws {
        let file = path("slotted.db")
        let created = try run(["keys", "init", file, "--kdf", "slot-raw", "--key-env", "A"], env: ["A": Self.rawKey])
        XCTAssertEqual(created.status, 0, created.stderr)
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: file)
        XCTAssertEqual(chmod(slotFile, 0o666), 0, "a slot file others can change is listed, not used")
        let (lines, json) = try bothForms(["info", file])
        let info = try XCTUnwrap(json as? [String: Any])
        let reason = try XCTUnwrap(info["key_slots_not_used"] as? String)
        let slots = try XCTUnwrap(info["key_slots"] as? [[String: Any]])
        XCTAssertEqual(slots.count, 1)
        XCTAssertEqual(
            Array(lines.prefix(3)),
            ["file: \(file)", "size: \(info["size"] ?? "?") bytes", "header: \(info["header"] ?? "?")"])
        XCTAssertEqual(
            lines.dropFirst(3).prefix(2), ["key slots: \(slotFile)", "  not used to open the database: \(reason)"])
        XCTAssertEqual(
            tableRows(lines.dropFirst(5)).map { $0.prefix(2).map { $0 } },
            slots.map { ["\($0["id"] ?? "?")", "\($0["kind"] ?? "?")"] })
        XCTAssertNil(info["tables"], "no key: nothing opened")
    }

    func testCheckTextIsItsJSONProblemsOrOK() throws {
        let sound = try makeEncrypted("sound.db")
        var (lines, json) = try bothForms(["check", sound, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
        var check = try XCTUnwrap(json as? [String: Any])
        XCTAssertEqual(check["ok"] as? Bool, true)
        XCTAssertEqual(check["problems"] as? [String], [])
        XCTAssertEqual(lines, ["ok"])

        let damaged = try makeEncrypted("damaged.db", rows: 2000, payload: 100)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: damaged))
        try handle.seek(toOffset: 50_000)
        try handle.write(contentsOf: Data(repeating: 0, count: 100))
        try handle.close()
        (lines, json) = try bothForms(
            ["check", damaged, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey], status: 2)
        check = try XCTUnwrap(json as? [String: Any])
        XCTAssertEqual(check["ok"] as? Bool, false)
        let problems = try XCTUnwrap(check["problems"] as? [String])
        XCTAssertFalse(problems.isEmpty)
        XCTAssertEqual(lines, problems.flatMap { $0.split(separator: "\n").map(String.init) })
    }

    func testKeysListTableIsItsJSONArray() throws {
        let file = path("slotted.db")
        var result = try run(["keys", "init", file, "--kdf", "slot-raw", "--key-env", "A"], env: ["A": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        result = try run(
            [
                "keys", "add", file, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "slot-raw", "--new-key-env",
                "B",
            ],
            env: ["A": Self.rawKey, "B": Self.otherRawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        let (lines, json) = try bothForms(["keys", "list", file])
        let slots = try XCTUnwrap(json as? [[String: Any]])
        XCTAssertEqual(slots.count, 2)
        XCTAssertEqual(
            lines.first?.split(separator: " ", omittingEmptySubsequences: true), ["id", "kind", "kdf", "created"])
        // The kdf column may hold spaces: the id and kind lead the row, the creation time ends it.
        XCTAssertEqual(
            tableRows(lines[...]).map { [$0[0], $0[1], $0[$0.count - 1]] },
            slots.map { ["\($0["id"] ?? "?")", "\($0["kind"] ?? "?")", "\($0["created"] ?? "?")"] })
    }
}
