import FMDB
import Foundation
import TestSupport
import XCTest

/// Inputs that are not regular files, damage found after the key is verified, and `check` after a crash.
final class ToolInputTests: ToolTestCase {
    /// Runs the tool with a time limit: a hang shows as exit 124, not as a stuck test.
    func runLimited(_ arguments: [String], env: [String: String] = [:]) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try runTool(arguments, env: env, wrapper: ["/usr/bin/timeout", "20"])
    }

    func testFIFOsDevicesAndDirectoriesAreRefusedWithoutHanging() throws {
        let enc = try makeEncrypted()
        let fifo = path("db.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        for input in [fifo, "/dev/zero", directory.url.path] {
            let commands: [[String]] = [
                ["info", input], ["info", input, "--kdf", "raw", "--key-env", "K"],
                ["check", input, "--kdf", "raw", "--key-env", "K"],
                ["sql", input, "select 1", "--kdf", "raw", "--key-env", "K"],
                ["rekey", input, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N"],
                ["decrypt", input, path("out.db"), "--kdf", "raw", "--key-env", "K"],
                ["encrypt", input, path("out.db"), "--kdf", "raw", "--key-env", "K"],
                ["export", input, path("out.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "N"],
            ]
            for arguments in commands {
                let result = try runLimited(arguments, env: env)
                XCTAssertEqual(result.status, 66, "\(arguments[0]) \(input): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains(input), "the message names the input: \(result.stderr)")
                XCTAssertFalse(FileManager.default.fileExists(atPath: path("out.db")))
            }
        }
        XCTAssertEqual(rowCount(enc, rawKey: Self.rawKey), 50)
    }

    /// A damaged data page, with the right key: every subcommand says "damaged" (exit 2), never "wrong key".
    func testDamageAfterTheKeyIsVerifiedIsExit2NotWrongKey() throws {
        let enc = try makeEncrypted(rows: 2_000, payload: 200)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: enc))
        bytes[bytes.count - 3_000] ^= 0xFF  // a leaf page near the end; page 1 and the schema stay intact
        try bytes.write(to: URL(fileURLWithPath: enc))
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let raw = ["--kdf", "raw", "--key-env", "K"]
        let commands: [[String]] = [
            ["sql", enc, "select sum(length(b)) from t"] + raw,
            ["sql", enc, "select count(*) from t", "--csv"] + raw,
            ["info", enc] + raw,
            ["check", enc] + raw,
            ["decrypt", enc, path("out.db")] + raw,
            ["export", enc, path("out.db"), "--new-key-env", "N"] + raw,
            ["rekey", enc, "--new-key-env", "N"] + raw,
        ]
        for arguments in commands {
            let result = try run(arguments, env: env)
            XCTAssertEqual(result.status, 2, "\(arguments[0]): \(result.stdout) \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("wrong key"), "\(arguments[0]): \(result.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("out.db")))
        }
        for arguments in commands.prefix(3) {
            let result = try run(arguments, env: env)
            XCTAssertTrue(
                result.stderr.contains("damaged") && result.stderr.contains("Page "),
                "the page, when known: \(result.stderr)")
        }
        // The wrong key is still a wrong key.
        let wrong = try run(["sql", enc, "select 1", "--kdf", "raw", "--key-env", "N"], env: env)
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
    }

    /// `rekey --help`'s advice after a crash — `check` with the old key, then the new — works after a real
    /// SIGKILL that leaves a hot journal, which a read-only open cannot roll back.
    func testCheckAfterARekeyKilledMidwayRecoversTheJournal() throws {
        let enc = try makeEncrypted(rows: 12_000, payload: 1000)
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = Self.rawKey
        environment["N"] = Self.otherRawKey
        var current = "K"
        var hotJournals = 0
        var delay = 0.0
        for round in 0..<12 where hotJournals < 2 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = [
                "rekey", enc, "--kdf", "raw", "--key-env", current, "--new-key-env", current == "K" ? "N" : "K",
                "--quiet",
            ]
            process.environment = environment
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Kill once the journal is hot (synced: its header has the magic number), a little later each round.
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning, Date() < deadline, !isHotJournal(enc + "-journal") { usleep(1_000) }
            usleep(useconds_t(delay * 1_000_000))
            let killed = process.isRunning
            if killed { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            delay += 0.1
            let journal = isHotJournal(enc + "-journal")
            guard killed else {
                current = current == "K" ? "N" : "K"
                continue
            }
            if journal { hotJournals += 1 }
            // The documented recovery: check with the old key, then with the new one.
            let old = try runProcess(
                tool, ["check", enc, "--kdf", "raw", "--key-env", current], environment: environment)
            if old.status != 0 {
                XCTAssertEqual(
                    old.status, 65, "round \(round): the old key is refused cleanly, not a write error: \(old.stderr)")
                current = current == "K" ? "N" : "K"
                let new = try runProcess(
                    tool, ["check", enc, "--kdf", "raw", "--key-env", current], environment: environment)
                XCTAssertEqual(new.status, 0, "round \(round) (hot journal: \(journal)): \(old.stderr) / \(new.stderr)")
            } else if journal {
                XCTAssertTrue(old.stderr.contains("recover"), old.stderr)
            }
            XCTAssertFalse(isHotJournal(enc + "-journal"), "round \(round): check rolled the hot journal back")
            XCTAssertEqual(
                rowCount(enc, rawKey: current == "K" ? Self.rawKey : Self.otherRawKey), 12_000, "round \(round)")
        }
        XCTAssertGreaterThan(hotJournals, 0, "at least one kill left a hot journal")
    }

    /// A rollback journal SQLite would play back: present, with the journal header's magic number.
    func isHotJournal(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let magic = (try? handle.read(upToCount: 8)) ?? Data()
        return magic == Data([0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7])
    }

    func testSQLWithANULByteOnStandardInputIsRefusedAndNothingRuns() throws {
        let enc = try makeEncrypted()
        let result = try run(
            ["sql", enc, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey],
            input: "CREATE TABLE x (a);\u{0} DROP TABLE t;")
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(result.stderr.contains("NUL byte"), result.stderr)
        XCTAssertEqual(rowCount(enc, rawKey: Self.rawKey), 50, "the statement after the NUL did not run")
        let check = try run(
            ["sql", enc, "SELECT count(*) FROM sqlite_master WHERE name = 'x'", "--kdf", "raw", "--key-env", "K"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").last, "0")
    }

    func testSQLThatIsNotUTF8OnStandardInputIsRefusedAndNothingRuns() throws {
        let enc = try makeEncrypted()
        let input = directory.path("not-utf8.sql")
        var bytes = Data("CREATE TABLE bad (v TEXT); INSERT INTO bad VALUES ('".utf8)
        bytes.append(contentsOf: [0xFF, 0xFE])
        bytes.append(Data("');".utf8))
        XCTAssertTrue(FileManager.default.createFile(atPath: input, contents: bytes))
        let result = try runTool(
            ["sql", enc, "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey],
            wrapper: ["/bin/sh", "-c", "f=$0; exec \"$@\" < \"$f\"", input])
        XCTAssertEqual(result.status, 64, result.stderr)
        XCTAssertTrue(result.stderr.contains("UTF-8"), result.stderr)
        let check = try run(
            ["sql", enc, "SELECT count(*) FROM sqlite_master WHERE name = 'bad'", "--kdf", "raw", "--key-env", "K"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").last, "0")
    }

}
