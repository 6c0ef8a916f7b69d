import FMDB
import Foundation
import TestSupport
import XCTest

/// A FIFO at a path the tool (or SQLite, or the key slots) opens beside the one it was given — `SRC-journal`,
/// `SRC-wal`, `SRC-keyslots`, `DEST-journal`, `DEST-wal`, `DEST-keyslots`, a key file, a systemd credential —
/// makes the command fail at once with a message, never hang. Each run has a 20 s limit (timeout -s KILL:
/// exit 137 means it hung).
final class ToolSideFileFIFOTests: ToolTestCase {
    func runLimited(_ arguments: [String], env: [String: String] = [:]) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try runTool(arguments, env: env, wrapper: ["/usr/bin/timeout", "-s", "KILL", "20"])
    }

    func fifo(_ path: String) {
        XCTAssertEqual(mkfifo(path, 0o600), 0, path)
    }

    func testAFIFOBesideTheSourceIsRefusedAtOnce() throws {
        let env = ["K": Self.rawKey]
        for suffix in ["-journal", "-wal", "-shm", "-keyslots"] {
            let enc = try makeEncrypted("enc\(suffix).db")
            fifo(enc + suffix)
            for arguments in [
                ["info", enc, "--kdf", "raw", "--key-env", "K"],
                ["decrypt", enc, path("out\(suffix).db"), "--kdf", "raw", "--key-env", "K", "--quiet"],
                ["sql", enc, "--kdf", "slot", "--key-env", "K", "select 1"],
            ] {
                let result = try runLimited(arguments, env: env)
                XCTAssertEqual(result.status, 66, "\(arguments): \(result.stderr)")
                XCTAssertTrue(
                    result.stderr.contains("\(suffix): is not a regular file (a FIFO"), "\(arguments): \(result.stderr)"
                )
            }
        }
    }

    func testAFIFOBesideTheDestinationIsRefusedAtOnce() throws {
        let enc = try makeEncrypted()
        for suffix in ["-journal", "-wal"] {
            let dest = path("dest\(suffix).db")
            fifo(dest + suffix)
            let result = try runLimited(
                ["decrypt", enc, dest, "--kdf", "raw", "--key-env", "K", "--quiet"], env: ["K": Self.rawKey])
            XCTAssertEqual(result.status, 73, result.stderr)
            XCTAssertTrue(result.stderr.contains("\(suffix): is not a regular file (a FIFO"), result.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: dest))
        }
        let dest = path("dest-slots.db")
        fifo(KeySlots.slotFilePath(forDatabaseAt: dest))
        let result = try runLimited(
            ["decrypt", enc, dest, "--kdf", "raw", "--key-env", "K", "--quiet"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 73, result.stderr)
        XCTAssertTrue(result.stderr.contains("-keyslots: already exists"), result.stderr)
        XCTAssertEqual(entries().filter { $0.contains("fmdb-cipher-") }, [], "no private directory left")
    }

    func testAFIFOAsAKeyFileOrCredentialIsRefusedAtOnce() throws {
        let enc = try makeEncrypted()
        let keyFIFO = path("key.fifo")
        fifo(keyFIFO)
        for arguments in [
            ["info", enc, "--kdf", "raw", "--key-file", keyFIFO],
            ["export", enc, path("copy.db"), "--kdf", "raw", "--key-env", "K", "--new-key-file", keyFIFO, "--quiet"],
        ] {
            let result = try runLimited(arguments, env: ["K": Self.rawKey])
            XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("a pipe with nothing written to it"), "\(arguments): \(result.stderr)")
        }
        let credentials = path("creds")
        XCTAssertEqual(mkdir(credentials, 0o700), 0)
        fifo(credentials + "/db-key")
        let credential = try runLimited(
            ["info", enc, "--kdf", "raw", "--key-credential", "db-key"],
            env: ["CREDENTIALS_DIRECTORY": credentials])
        XCTAssertEqual(credential.status, 66, credential.stderr)
        XCTAssertTrue(credential.stderr.contains("not a regular file"), credential.stderr)
    }

    /// A pipe with a writer (`--key-file <(…)`) is still read to its end.
    func testAPipeWithAWriterStillWorksAsAKeyFile() throws {
        let enc = try makeEncrypted()
        let bash = try XCTUnwrap(which("bash"))
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = Self.rawKey
        let result = try runProcess(
            "/usr/bin/timeout",
            [
                "-s", "KILL", "20", bash, "-c",
                "exec \"$0\" info \"$1\" --kdf raw --key-file <(sleep 0.3; printf %s \"$K\")",
                tool, enc,
            ], input: "", environment: environment)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("t"), result.stdout)
    }
}
