import Foundation
import TestSupport
import XCTest

/// One exit-code table: the help prints it (`Exit.table`), the man page's EXIT STATUS is made from the help
/// (Scripts/install), and each row of the DocC article's table starts with the help's words.
final class ExitStatusTableToolTests: ToolTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The rows "  CODE  MEANING" after "Exit codes:" in the root command's help (its JSON dump: unwrapped).
    func helpTable() throws -> [(code: String, meaning: String)] {
        let dump = try run(["--experimental-dump-help"])
        XCTAssertEqual(dump.status, 0, dump.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any]
        let command = try XCTUnwrap(json?["command"] as? [String: Any])
        let discussion = try XCTUnwrap(command["discussion"] as? String)
        let range = try XCTUnwrap(discussion.range(of: "Exit codes:\n"))
        return discussion[range.upperBound...].split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 1)
            guard line.hasPrefix("  "), fields.count == 2, Int(fields[0]) != nil else { return nil }
            return (String(fields[0]), fields[1].trimmingCharacters(in: .whitespaces))
        }
    }

    /// The rows `| CODE | MEANING |` of the table under `heading` in a Markdown file, without `**` and backticks.
    func markdownTable(_ file: String, after heading: String) throws -> [(code: String, meaning: String)] {
        let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
        let start = try XCTUnwrap(text.range(of: heading), "\(file): \(heading)")
        var rows: [(String, String)] = []
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
            .drop(while: { !$0.hasPrefix("|") })
        {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", maxSplits: 2).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 2, Int(cells[0]) != nil else { continue }
            var meaning = cells[1]
            if meaning.hasSuffix("|") { meaning.removeLast() }
            meaning = meaning.replacingOccurrences(of: "**", with: "").replacingOccurrences(of: "`", with: "")
            rows.append((cells[0], meaning.trimmingCharacters(in: .whitespaces)))
        }
        return rows
    }

    func testTheHelpTheManPageAndTheArticleShareOneExitCodeTable() throws {
        let help = try helpTable()
        XCTAssertEqual(
            help.map(\.code), ["0", "1", "2", "3", "4", "5", "64", "65", "66", "69", "73", "74", "75"],
            "the help's table")

        // The man page's EXIT STATUS, as Scripts/install makes it from the built binary's help.
        let section = try runProcess(
            "/bin/bash",
            [
                Self.root.appendingPathComponent("Scripts/install").path,
                "--exit-status", tool,
            ])
        XCTAssertEqual(section.status, 0, section.stderr)
        let lines = section.stdout.split(separator: "\n").map(String.init)
        var manual: [(code: String, meaning: String)] = []
        for (index, line) in lines.enumerated() where line.hasPrefix(".It ") && index + 1 < lines.count {
            manual.append((String(line.dropFirst(4)), String(lines[index + 1].dropFirst(2))))
        }
        XCTAssertEqual(manual.map(\.code), help.map(\.code), "the man page's EXIT STATUS: \(section.stdout)")
        XCTAssertEqual(manual.map(\.meaning), help.map(\.meaning))

        // The DocC article: the same codes, each row starting with the help's words.
        let article = try markdownTable("Sources/FMDB/FMDB.docc/CommandLineTool.md", after: "## Exit codes")
        XCTAssertEqual(article.map(\.code), help.map(\.code), "CommandLineTool.md's table")
        for (row, entry) in zip(article, help) where !row.meaning.hasPrefix(entry.meaning) {
            XCTFail("CommandLineTool.md, exit \(row.code): \"\(row.meaning)\" does not start with \"\(entry.meaning)\"")
        }
        // The README's short table: the same codes.
        let readme = try markdownTable("README.md", after: "Exit codes, in short")
        XCTAssertEqual(readme.map(\.code), help.map(\.code), "README.md's table")
    }
}
