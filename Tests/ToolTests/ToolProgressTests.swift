import FMDB
import TestSupport
import Foundation
import XCTest

/// `--progress`: machine-readable progress lines on standard error when it is not a terminal.
final class ToolProgressTests: ToolTestCase {
    /// The `progress VERB PERCENT BYTES TOTAL RATE` lines of `stderr`, as numbers; fails on any other
    /// line that starts with "progress".
    private func progressLines(_ stderr: String, verb: String = "rekey") -> [[Int64]] {
        stderr.split(separator: "\n").filter { $0.hasPrefix("progress") }.compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 6, fields[1] == verb else {
                XCTFail("not a progress line: \(line)")
                return nil
            }
            let numbers = fields[2...].compactMap { Int64($0) }
            XCTAssertEqual(numbers.count, 4, "four integers: \(line)")
            return numbers
        }
    }

    func testRekeyPrintsProgressLinesWhenAsked() throws {
        let enc = try makeEncrypted(rows: 2_000, payload: 1_000)
        let size = Int64(
            try XCTUnwrap(FileManager.default.attributesOfItem(atPath: enc)[.size] as? NSNumber).int64Value)
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let result = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--progress"], env: env)
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = progressLines(result.stderr)
        XCTAssertGreaterThanOrEqual(lines.count, 2, result.stderr)
        XCTAssertEqual(lines.first?[0], 0, "a line when the rekey starts")
        XCTAssertEqual(lines.first?[2], size)
        XCTAssertEqual(lines.last?[0], 100, "a line at 100 when it is done")
        XCTAssertEqual(lines.last?[1], size, "all the bytes")
        XCTAssertEqual(lines.last?[2], size, "of the database's size")
        XCTAssertGreaterThan(lines.last?[3] ?? 0, 0, "a throughput")
        XCTAssertEqual(lines.map { $0[0] }, lines.map { $0[0] }.sorted(), "the percentage never goes back")
        XCTAssertEqual(rowCount(enc, rawKey: Self.otherRawKey), 2_000)
    }

    func testNoProgressLinesUnlessAskedAndNoneAt100WhenTheRekeyFails() throws {
        let enc = try makeEncrypted()
        let env = ["K": Self.rawKey, "N": Self.otherRawKey, "W": String(repeating: "77", count: 32)]
        let plain = try run(["rekey", enc, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N"], env: env)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(progressLines(plain.stderr).count, 0, plain.stderr)
        let quiet = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "N", "--new-key-env", "K", "--progress", "--quiet"], env: env)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(progressLines(quiet.stderr).count, 0, "--quiet wins: \(quiet.stderr)")
        let wrong = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "W", "--new-key-env", "N", "--progress"], env: env)
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
        XCTAssertFalse(progressLines(wrong.stderr).contains { $0[0] == 100 }, wrong.stderr)
    }

    /// The lines of one copy: one at 0 when it starts, in order, one at 100 of the source's size at the end.
    private func assertCopyLines(_ result: (status: Int32, stdout: String, stderr: String), verb: String, source: Int64)
    {
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = progressLines(result.stderr, verb: verb)
        XCTAssertGreaterThanOrEqual(lines.count, 2, "\(verb): \(result.stderr)")
        XCTAssertEqual(lines.first?[0], 0, "\(verb): a line when the copy starts")
        XCTAssertEqual(lines.first?[2], source, "\(verb): of the source's size")
        XCTAssertEqual(lines.last?[0], 100, "\(verb): a line at 100 when it is done")
        XCTAssertEqual(lines.last?[1], source, "\(verb): all the bytes")
        XCTAssertEqual(lines.map { $0[0] }, lines.map { $0[0] }.sorted(), "\(verb): the percentage never goes back")
    }

    private func size(_ file: String) throws -> Int64 {
        try XCTUnwrap(FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber).int64Value
    }

    func testEveryCopyPrintsProgressLinesWhenAsked() throws {
        let plain = try makePlaintext(rows: 500, payload: 1_000)
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let enc = path("enc.db")
        assertCopyLines(
            try run(["encrypt", plain, enc, "--kdf", "raw", "--key-env", "K", "--progress"], env: env),
            verb: "encrypt", source: try size(plain))
        let copy = path("copy.db")
        assertCopyLines(
            try run(
                ["export", enc, copy, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--progress"], env: env),
            verb: "export", source: try size(enc))
        assertCopyLines(
            try run(["decrypt", copy, path("out.db"), "--kdf", "raw", "--key-env", "N", "--progress"], env: env),
            verb: "decrypt", source: try size(copy))
        XCTAssertEqual(rowCount(copy, rawKey: Self.otherRawKey), 500)
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { return }
        let old = path("v3.db")
        let exported = try run(
            ["export", enc, old, "--kdf", "raw", "--key-env", "K", "--new-key-env", "K", "--format", "3", "--quiet"],
            env: env)
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let oldSize = try size(old)  // before: migrate replaces it in place
        assertCopyLines(
            try run(["migrate", old, "--kdf", "raw", "--key-env", "K", "--progress"], env: env),
            verb: "migrate", source: oldSize)
    }

    func testNoCopyProgressLinesUnlessAskedAndNoneAt100WhenTheCopyFails() throws {
        let plain = try makePlaintext(rows: 200, payload: 1_000)
        let env = ["K": Self.rawKey]
        let quiet = try run(["encrypt", plain, path("a.db"), "--kdf", "raw", "--key-env", "K"], env: env)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(progressLines(quiet.stderr, verb: "encrypt").count, 0, quiet.stderr)
        let silenced = try run(
            ["encrypt", plain, path("b.db"), "--kdf", "raw", "--key-env", "K", "--progress", "--quiet"], env: env)
        XCTAssertEqual(silenced.status, 0, silenced.stderr)
        XCTAssertEqual(progressLines(silenced.stderr, verb: "encrypt").count, 0, "--quiet wins: \(silenced.stderr)")
        // DEST exists: refused before any copying, so no line at all.
        let refused = try run(
            ["encrypt", plain, path("a.db"), "--kdf", "raw", "--key-env", "K", "--progress"], env: env)
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertFalse(progressLines(refused.stderr, verb: "encrypt").contains { $0[0] == 100 }, refused.stderr)
    }
}

/// Progress of `rekey` on a terminal (`script` gives the tool one) and `rekey --data-key --progress` lines.
final class ToolRekeyProgressTests: ToolTestCase {
    func testRekeyOnATerminalShowsAPercentageAndThroughput() throws {
        let enc = try makeEncrypted(rows: 200, payload: 1_000)
        var env = ProcessInfo.processInfo.environment
        env["K"] = Self.rawKey
        env["N"] = Self.otherRawKey
        let script = try XCTUnwrap(which("script"))
        let command = "\(tool!) rekey \(enc) --kdf raw --key-env K --new-key-env N"
        let tty = try runProcess(script, ["-qec", command, "/dev/null"], environment: env)
        XCTAssertEqual(tty.status, 0, tty.stdout + tty.stderr)
        XCTAssertTrue(tty.stdout.contains("rekey ["), "a bar: \(tty.stdout)")
        XCTAssertTrue(tty.stdout.contains("100%"), "at 100% when done: \(tty.stdout)")
        XCTAssertNotNil(tty.stdout.range(of: #"[0-9]+\.[0-9] MB/s"#, options: .regularExpression), tty.stdout)
        XCTAssertTrue(tty.stdout.contains("rekeyed \(enc)"), tty.stdout)
        XCTAssertEqual(rowCount(enc, rawKey: Self.otherRawKey), 200)
    }

    /// What a terminal shows for `output`: "\r" goes back to the start of the line, ESC [K clears from the
    /// cursor to the end of the line, other characters overwrite; one string per finished line.
    func rendered(_ output: String) -> [String] {
        var lines: [String] = []
        var line: [Character] = []
        var column = 0
        var rest = Substring(output)
        while let character = rest.first {
            rest = rest.dropFirst()
            switch character {
            case "\r": column = 0
            case "\n", "\r\n":
                lines.append(String(line))
                line = []
                column = 0
            case "\u{1B}" where rest.hasPrefix("[K"):
                rest = rest.dropFirst(2)
                line.removeSubrange(min(column, line.count)...)
            default:
                if column < line.count { line[column] = character } else { line.append(character) }
                column += 1
            }
        }
        if !line.isEmpty { lines.append(String(line)) }
        return lines
    }

    func testTheBarNeverGoesBackShowsTimeLeftAndEndsClean() throws {
        let enc = try makeEncrypted(rows: 30_000, payload: 1_000)
        var env = ProcessInfo.processInfo.environment
        env["K"] = Self.rawKey
        env["N"] = Self.otherRawKey
        let script = try XCTUnwrap(which("script"))
        let command = "\(tool!) rekey \(enc) --kdf raw --key-env K --new-key-env N"
        let tty = try runProcess(script, ["-qec", command, "/dev/null"], environment: env)
        XCTAssertEqual(tty.status, 0, tty.stdout + tty.stderr)
        // Every state drawn, in order: the percentage never goes back.
        let percentages = tty.stdout.components(separatedBy: "\r").compactMap { state -> Int? in
            guard let range = state.range(of: #"\] +[0-9]+%"#, options: .regularExpression) else { return nil }
            return Int(state[range].dropFirst().dropLast().trimmingCharacters(in: .whitespaces))
        }
        XCTAssertGreaterThan(percentages.count, 2, tty.stdout)
        XCTAssertEqual(percentages, percentages.sorted(), "the percentage never goes back")
        XCTAssertEqual(percentages.last, 100)
        XCTAssertNotNil(tty.stdout.range(of: #"ETA [0-9]+:[0-9]{2}"#, options: .regularExpression), "time left")
        // What the terminal shows at the end: the bar at 100%, whole, then the messages; no stray character.
        let screen = rendered(tty.stdout).filter { !$0.isEmpty }
        XCTAssertNotNil(
            screen.first?.range(of: #"^rekey \[#{30}\] 100% [0-9.]+ MB/s in [0-9.]+s$"#, options: .regularExpression),
            "\(screen)")
        XCTAssertEqual(screen.dropFirst().first, "rekey: done", "\(screen)")
        XCTAssertEqual(screen.dropFirst(2).first, "rekeyed \(enc)", "\(screen)")
    }

    func testDataKeyRotationPrintsProgressLinesWhenAsked() throws {
        let plain = try makePlaintext(rows: 200, payload: 1_000)
        let db = path("slotted.db")
        let env = ["K": "an administrator's passphrase"]
        let made = try run(["encrypt", plain, db, "--kdf", "slot", "--key-env", "K", "--quiet"], env: env)
        XCTAssertEqual(made.status, 0, made.stderr)
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: db)[.size] as? NSNumber).int64Value
        let rotated = try run(["rekey", "--data-key", db, "--key-env", "K", "--progress"], env: env)
        XCTAssertEqual(rotated.status, 0, rotated.stderr)
        let lines = rotated.stderr.split(separator: "\n").filter { $0.hasPrefix("progress ") }
            .map { $0.split(separator: " ").map(String.init) }
        XCTAssertGreaterThanOrEqual(lines.count, 2, rotated.stderr)
        XCTAssertTrue(
            lines.allSatisfy { $0.count == 6 && $0[1] == "rekey" && $0[2...].allSatisfy { Int64($0) != nil } })
        XCTAssertEqual(lines.first?[2], "0", "a line when the rotation starts")
        XCTAssertEqual(lines.first?[4], String(size))
        XCTAssertEqual(lines.last?[2], "100", "a line at 100 when it is done")
        let opened = try run(["sql", db, "select count(*) from t", "--csv", "--key-env", "K"], env: env)
        XCTAssertEqual(opened.stdout, "count(*)\n200\n", opened.stderr)
    }
}
