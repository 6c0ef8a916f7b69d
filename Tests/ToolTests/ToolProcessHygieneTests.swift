import FMDB
import Foundation
import TestSupport
import XCTest

/// The tool's process leaks nothing: no core dumps, no secret echoed by an error or a terminal, the terminal
/// restored after Ctrl-C, a warning for key files others can read.
final class ToolProcessHygieneTests: ToolTestCase {
    /// Core dumps off and the process not dumpable, from the start: checked from outside while the tool
    /// waits to read a key from a FIFO the test holds open. A non-dumpable process's /proc files belong to
    /// root, so the tool runs as `nobody` when the test runs as root.
    func testCoreDumpsAreOffAndTheProcessIsNotDumpable() throws {
        let plain = try makePlaintext()
        XCTAssertEqual(chmod(directory.url.path, 0o755), 0)
        XCTAssertEqual(chmod(plain, 0o644), 0)
        let fifo = path("key.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o666), 0)
        XCTAssertEqual(chmod(fifo, 0o666), 0)
        // Held open for writing (and never written to): the tool's read of its key waits, instead of
        // reading an empty pipe nobody writes to, which it refuses.
        let writer = open(fifo, O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(writer, 0)
        defer { close(writer) }
        let process = Process()
        if getuid() == 0 {
            let tool = try copyOfTheToolThatNobodyCanRun()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid=65534", "--regid=65534", "--clear-groups", "--", tool, "info", plain, "--key-file", fifo,
            ]
        } else {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = ["info", plain, "--key-file", fifo]
        }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        let pid = process.processIdentifier
        // Wait until the tool itself (not setpriv) blocks in open() on the FIFO.
        var waiting = false
        for _ in 0..<400 where !waiting {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
            waiting = command.hasPrefix("fmdb-cipher") && stat.contains(") S ")
            if !waiting { usleep(25_000) }
        }
        XCTAssertTrue(waiting, "the tool waits for its key")
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let core = try XCTUnwrap(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        XCTAssertEqual(
            core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2), ["0", "0"], String(core)
        )
        var status = stat()
        XCTAssertEqual(stat("/proc/\(pid)/environ", &status), 0)
        XCTAssertEqual(
            status.st_uid, 0,
            "a process that is not dumpable has /proc files owned by root (the tool runs as uid "
                + "\(getuid() == 0 ? 65534 : getuid()))"
        )
        XCTAssertNotEqual(getuid() == 0 ? 65534 : getuid(), 0)
    }

    /// `nobody` may not reach the build folder (a checkout inside a 0700 temporary directory, as a CI
    /// clone can be), nor a private SQLCipher the tool was linked against there (the 4.x stage). So it runs
    /// a copy in the test's own directory, with such a library copied beside it (`$ORIGIN` is in the tool's
    /// runpath).
    func copyOfTheToolThatNobodyCanRun() throws -> String {
        let copy = path("fmdb-cipher")
        try FileManager.default.copyItem(atPath: tool, toPath: copy)
        XCTAssertEqual(chmod(copy, 0o755), 0)
        let ldd = try runProcess("/usr/bin/ldd", [tool])
        for line in ldd.stdout.split(separator: "\n") where line.contains("libsqlcipher") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count >= 3, parts[1] == "=>" else { continue }
            let library = String(parts[2])
            if library.hasPrefix("/usr/lib/") || library.hasPrefix("/lib/") { continue }
            let name = String(parts[0].trimmingCharacters(in: .whitespaces))
            let beside = path(name)
            try FileManager.default.copyItem(
                atPath: URL(fileURLWithPath: library).resolvingSymlinksInPath().path, toPath: beside)
            XCTAssertEqual(chmod(beside, 0o644), 0)
        }
        return copy
    }

    func testMisplacedKeysAreNeverEchoed() throws {
        let enc = try makeEncrypted()
        let secret = "hunter2-\(UUID().uuidString)"
        let cases: [([String], Int32)] = [
            (["check", enc, "--key-env", secret], 64),  // the value where the name should be
            (["check", enc, "--new-key-env", secret], 64),  // an option the subcommand does not have
            (["rekey", enc, "--key-env", "K", "--new-key-env", secret], 64),
            (["check", enc, "--key-file", secret], 66),
            (["check", enc, secret, "--key-env", "K"], 64),  // a stray positional argument
            (["check", enc, "--kdf", secret, "--key-env", "K"], 64),
            (["check", enc, "--kdf=\(secret)", "--key-env", "K"], 64),
            (["check", enc, "--key", secret], 64),
        ]
        for (arguments, expected) in cases {
            let result = try run(arguments, env: ["K": Self.rawKey])
            XCTAssertEqual(result.status, expected, "\(arguments.dropFirst(2)): \(result.stderr)")
            XCTAssertFalse(result.stderr.isEmpty, "a reason is given")
            XCTAssertFalse(
                (result.stdout + result.stderr).contains(secret),
                "\(arguments.dropFirst(2)) echoes the secret: \(result.stderr)")
        }
    }

    func testKeyStdinOnATerminalDoesNotEcho() throws {
        let enc = try makeEncrypted()
        // The key is typed once the tool turned echo off (type-ahead is flushed then, as getpass does).
        let result = try runOnTerminal([tool, "check", enc, "--kdf", "raw", "--key-stdin"], answers: [Self.rawKey])
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.echoOffAtLastPrompt, "echo is off while the key is typed: \(result.output)")
        XCTAssertTrue(result.output.contains("ok"), result.output)
        XCTAssertFalse(
            result.output.contains(Self.rawKey), "the key typed on the terminal is not echoed: \(result.output)")
    }

    /// Ctrl-C at the prompt ends the tool through its SIGINT handler (exit 130) and leaves the terminal echoing.
    func testControlCAtThePromptRestoresTheTerminal() throws {
        let enc = try makeEncrypted()
        // Ctrl-C once the prompt is shown with echo off: the prompt's handlers are installed by then.
        let result = try runOnTerminal([tool, "check", enc, "--kdf", "raw"], answers: [""], controlC: true)
        XCTAssertTrue(result.output.contains("Enter"), "prompted: \(result.output)")
        XCTAssertTrue(result.echoOffAtLastPrompt, "echo is off while the key is typed: \(result.output)")
        // The prompt hands the signal on to the tool's own handler, which ends it as every interrupted command
        // ends (128 + 2, after removing any partial output).
        XCTAssertEqual(result.status, 130, "the tool ends by its SIGINT handler: \(result.output)")
        XCTAssertTrue(result.echoOnAfter, "the terminal echoes again: \(result.output)")
    }

    func testAKeyFileOthersCanReadGetsAWarningNamingItsMode() throws {
        let enc = try makeEncrypted()
        let keyFile = path("key.hex")
        try Data((Self.rawKey + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
        XCTAssertEqual(chmod(keyFile, 0o644), 0)
        var result = try run(["check", enc, "--kdf", "raw", "--key-file", keyFile])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("warning") && result.stderr.contains("0644"), result.stderr)
        XCTAssertEqual(chmod(keyFile, 0o640), 0)
        result = try run(["check", enc, "--kdf", "raw", "--key-file", keyFile])
        XCTAssertTrue(result.stderr.contains("0640"), result.stderr)
        XCTAssertEqual(chmod(keyFile, 0o600), 0)
        result = try run(["check", enc, "--kdf", "raw", "--key-file", keyFile])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stderr.contains("warning"), "0600 is fine: \(result.stderr)")
        // A pipe (`--key-file <(...)`) is not a file with a mode to warn about.
        result = try run(["check", enc, "--kdf", "raw", "--key-file", "/dev/stdin"], input: Self.rawKey + "\n")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(result.stderr.contains("warning"), result.stderr)
    }
}
