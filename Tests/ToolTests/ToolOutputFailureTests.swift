import FMDB
import Foundation
import TestSupport
import XCTest

/// A write to standard output that fails (here /dev/full: ENOSPC) is never ignored: the command exits 74
/// with a message saying what was not written, whether it was a secret shown once (a recovery key, the
/// data key) or command output; nothing traps.
final class ToolOutputFailureTests: ToolTestCase {
    /// Runs the tool with standard output on /dev/full.
    func runToFullDevice(_ arguments: [String], env: [String: String] = [:], input: String = "") throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        try runTool(arguments, env: env, input: input, standardOutput: "/dev/full")
    }

    func testSecretsThatCannotBeWrittenFailWithExit74() throws {
        let db = path("app.db")
        let created = try runToFullDevice(
            ["keys", "init", db, "--key-env", "K", "--recovery", "--slot-kdf", "pbkdf2"], env: ["K": "alpha"])
        XCTAssertEqual(created.status, 74, created.stderr)
        XCTAssertTrue(created.stderr.contains("recovery key") && created.stderr.contains("not shown"), created.stderr)

        let recovery = try runToFullDevice(["keys", "recovery", db, "--key-env", "K"], env: ["K": "alpha"])
        XCTAssertEqual(recovery.status, 74, recovery.stderr)
        XCTAssertTrue(recovery.stderr.contains("recovery key"), recovery.stderr)

        let raw = try runToFullDevice(
            ["keys", "export-raw", db, "--key-env", "K", "--i-understand-this-reveals-the-data-key"],
            env: ["K": "alpha"])
        XCTAssertEqual(raw.status, 74, raw.stderr)
        XCTAssertTrue(raw.stderr.contains("data key") && raw.stderr.contains("No space left"), raw.stderr)

        let plain = try makePlaintext()
        let encrypted = try runToFullDevice(
            [
                "encrypt", plain, path("slotted.db"), "--kdf", "slot", "--slot-kdf", "pbkdf2",
                "--recovery", "--key-env", "K", "--quiet",
            ], env: ["K": "alpha"])
        XCTAssertEqual(encrypted.status, 74, encrypted.stderr)
        XCTAssertTrue(encrypted.stderr.contains("recovery key"), encrypted.stderr)
    }

    func testCommandOutputThatCannotBeWrittenFailsWithExit74() throws {
        let enc = try makeEncrypted()
        let env = ["K": Self.rawKey]
        let commands: [[String]] = [
            ["info", enc],
            ["info", enc, "--json", "--kdf", "raw", "--key-env", "K"],
            ["check", enc, "--kdf", "raw", "--key-env", "K"],
            ["check", enc, "--json", "--kdf", "raw", "--key-env", "K"],
            ["sql", enc, "--kdf", "raw", "--key-env", "K", "SELECT v FROM t"],
            ["sql", enc, "--kdf", "raw", "--key-env", "K", "--json", "SELECT v FROM t"],
        ]
        for arguments in commands {
            let result = try runToFullDevice(arguments, env: env)
            XCTAssertEqual(result.status, 74, "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("No space left"), "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("Fatal error"), "\(arguments): \(result.stderr)")
        }
    }

    /// Reading the SQL from a standard input that cannot be read is an I/O error, not a trap.
    func testUnreadableStandardInputIsAnIOError() throws {
        let plain = try makePlaintext()
        let result = try runProcess("/bin/sh", ["-c", "exec \"$0\" sql \"$1\" < /", tool, plain])
        XCTAssertEqual(result.status, 74, result.stderr)
        XCTAssertTrue(result.stderr.contains("Is a directory"), result.stderr)
    }
}
