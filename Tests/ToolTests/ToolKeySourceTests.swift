import FMDB
import Foundation
import TestSupport
import XCTest

/// Options that name a key source (--key-file, --new-key-file, --slot-key-file, --key-env, --new-key-env,
/// --key-credential): their value is never printed — it may be the secret, typed where the path or name
/// belongs — and a key file or credential others can change is refused, as is a credentials directory
/// others can write to.
final class ToolKeySourceTests: ToolTestCase {
    func makeSlotted() throws -> String {
        let db = path("app.db")
        let created = try run(["keys", "init", db, "--key-env", "K", "--slot-kdf", "pbkdf2"], env: ["K": "alpha"])
        XCTAssertEqual(created.status, 0, created.stderr)
        return db
    }

    func testKeySourceValuesAreNeverEchoed() throws {
        let db = try makeSlotted()
        let enc = try makeEncrypted()
        let secret = "S3cr3tTyped"
        // A readable slot key file whose name is the secret: the mode warning does not name it either.
        let named = path(secret + "-file")
        try Data("alpha\n".utf8).write(to: URL(fileURLWithPath: named))
        XCTAssertEqual(chmod(named, 0o644), 0)
        let commands: [[String]] = [
            ["rekey", "--data-key", db, "--key-env", "K", "--slot-key-file", secret, "--quiet"],
            ["rekey", "--data-key", db, "--key-env", "K", "--slot-key-file", named, "--quiet"],
            ["info", enc, "--kdf", "raw", "--key-file", secret],
            ["export", enc, path("copy.db"), "--kdf", "raw", "--key-env", "K", "--new-key-file", secret, "--quiet"],
            ["info", enc, "--kdf", "raw", "--key-env", secret],
        ]
        for arguments in commands {
            let result = try run(arguments, env: ["K": "alpha"])
            XCTAssertFalse(result.stderr.contains(secret), "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stdout.contains(secret), "\(arguments): \(result.stdout)")
        }
        let warned = try run(
            ["rekey", "--data-key", db, "--key-env", "K", "--slot-key-file", named, "--quiet"], env: ["K": "alpha"])
        XCTAssertTrue(warned.stderr.contains("--slot-key-file"), warned.stderr)
    }

    func testKeyFilesAndCredentialsOthersCanChangeAreRefused() throws {
        let enc = try makeEncrypted()
        let keyFile = path("key")
        try Data(Self.rawKey.utf8).write(to: URL(fileURLWithPath: keyFile))
        for mode: mode_t in [0o620, 0o602, 0o666] {
            XCTAssertEqual(chmod(keyFile, mode), 0)
            for arguments in [
                ["info", enc, "--kdf", "raw", "--key-file", keyFile],
                [
                    "export", enc, path("copy.db"), "--kdf", "raw", "--key-env", "K", "--new-key-file", keyFile,
                    "--quiet",
                ],
            ] {
                let result = try run(arguments, env: ["K": Self.rawKey])
                XCTAssertEqual(result.status, 66, "\(mode) \(arguments): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains("group or others can change it"), result.stderr)
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("copy.db")))
        XCTAssertEqual(chmod(keyFile, 0o600), 0)
        XCTAssertEqual(try run(["info", enc, "--kdf", "raw", "--key-file", keyFile]).status, 0)

        let credentials = path("creds")
        XCTAssertEqual(mkdir(credentials, 0o700), 0)
        let credential = credentials + "/db-key"
        try Data(Self.rawKey.utf8).write(to: URL(fileURLWithPath: credential))
        let info = ["info", enc, "--kdf", "raw", "--key-credential", "db-key"]
        for mode: mode_t in [0o620, 0o602] {
            XCTAssertEqual(chmod(credential, mode), 0)
            let result = try run(info, env: ["CREDENTIALS_DIRECTORY": credentials])
            XCTAssertEqual(result.status, 66, result.stderr)
            XCTAssertTrue(result.stderr.contains("writable by group or others"), result.stderr)
        }
        XCTAssertEqual(chmod(credential, 0o400), 0)
        XCTAssertEqual(try run(info, env: ["CREDENTIALS_DIRECTORY": credentials]).status, 0)
        for mode: mode_t in [0o770, 0o707, 0o1777] {
            XCTAssertEqual(chmod(credentials, mode), 0)
            let result = try run(info, env: ["CREDENTIALS_DIRECTORY": credentials])
            XCTAssertEqual(result.status, 66, "\(mode): \(result.stderr)")
            XCTAssertTrue(
                result.stderr.contains("CREDENTIALS_DIRECTORY")
                    && result.stderr.contains("writable by group or others"),
                result.stderr)
        }
        XCTAssertEqual(chmod(credentials, 0o700), 0)
    }

    /// SIGTERM while the tool waits at its key prompt (echo off, on a pseudo-terminal script(1) makes):
    /// echo is back on afterwards, and the tool died of the signal (status 128 + 15).
    func testSignalAtThePromptTurnsEchoBackOnThenEndsTheTool() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { throw XCTSkip("no script(1)") }
        let db = path("random.db")
        try Data((0..<8192).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: db))
        let echo = "stty -a | grep -o -- '-\\?echo ' | head -1"
        let shell = """
            '\(tool!)' sql '\(db)' 'select 1' </dev/tty & p=$!
            for i in $(seq 600); do stty -a | grep -q -- '-echo ' && break; sleep 0.1; done
            echo "during: $(\(echo))"; kill -TERM $p; wait $p; echo "status: $?"; echo "after: $(\(echo))"
            """
        // script(1) forwards the end of its standard input to the terminal as an end of file, which would end
        // the prompt before the signal when it comes late: its input is a pipe that stays open until it is done.
        let driver = """
            exec 3< <(sleep 600); /usr/bin/script -qec "$1" /dev/null <&3; status=$?; kill $! 2>/dev/null; exit $status
            """
        let result = try runProcess("/bin/bash", ["-c", driver, "bash", shell])
        let lines = result.stdout.replacingOccurrences(of: "\r", with: "")
        XCTAssertTrue(lines.contains("Enter key for"), lines)
        XCTAssertTrue(lines.contains("during: -echo"), lines)
        XCTAssertTrue(lines.contains("status: 143"), lines)
        XCTAssertTrue(lines.contains("after: echo"), lines)
    }
}
