import FMDB
import Foundation
import TestSupport
import XCTest

/// SIGINT, SIGTERM or SIGHUP in the middle of a copy (decrypt, encrypt, export) removes the partial new file
/// and its private directory, and the tool exits 128 + the signal: no partial plaintext is left behind.
final class ToolSignalCleanupTests: ToolTestCase {
    /// Starts the tool, waits until the partial new file in its private directory beside `destination` holds
    /// over 1 MB, sends `signal`, and returns how it ended (nil: that never happened within 30 s).
    func interrupt(_ arguments: [String], destination: String, with signal: Int32, env: [String: String])
        throws -> (status: Int32, reason: Process.TerminationReason)?
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment.merge(env) { _, new in new }
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let prefix = "." + URL(fileURLWithPath: destination).lastPathComponent + ".fmdb-cipher-"
        let deadline = Date().addingTimeInterval(30)
        var seen = false
        while Date() < deadline, process.isRunning {
            // Mid-copy: the partial new file in the private directory holds over 1 MB.
            if let folder = entries().first(where: { $0.hasPrefix(prefix) }),
                fileSize(path(folder) + "/new.db") > 1_000_000
            {
                seen = true
                break
            }
            usleep(1_000)
        }
        if seen { kill(process.processIdentifier, signal) }
        process.waitUntilExit()
        return seen ? (process.terminationStatus, process.terminationReason) : nil
    }

    func testASignalMidCopyRemovesThePartialOutput() throws {
        // Large enough that the copy takes a while: ~40 MB.
        let enc = try makeEncrypted(rows: 10_000, payload: 4_000)
        let plain = path("src-enc.db")
        let env = ["K": Self.rawKey, "NK": Self.otherRawKey]
        let cases: [([String], String, Int32)] = [
            (
                ["decrypt", enc, path("out-int.db"), "--kdf", "raw", "--key-env", "K", "--quiet"], path("out-int.db"),
                SIGINT
            ),
            (
                ["decrypt", enc, path("out-term.db"), "--kdf", "raw", "--key-env", "K", "--quiet"], path("out-term.db"),
                SIGTERM
            ),
            (
                [
                    "export", enc, path("out-hup.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env", "NK",
                    "--quiet",
                ],
                path("out-hup.db"), SIGHUP
            ),
            (
                ["encrypt", plain, path("out-enc.db"), "--kdf", "raw", "--key-env", "K", "--quiet"], path("out-enc.db"),
                SIGINT
            ),
        ]
        for (arguments, destination, signal) in cases {
            let ended = try XCTUnwrap(
                try interrupt(arguments, destination: destination, with: signal, env: env),
                "\(arguments[0]) never made its private directory")
            XCTAssertEqual(ended.reason, .exit, "\(arguments[0]): exits, not killed by the signal")
            XCTAssertEqual(ended.status, 128 + signal, "\(arguments[0])")
            XCTAssertFalse(FileManager.default.fileExists(atPath: destination), "\(arguments[0]): no DEST")
            XCTAssertEqual(
                entries().filter { $0.contains(".fmdb-cipher-") }, [], "\(arguments[0]): no private directory left")
        }
        XCTAssertEqual(rowCount(enc, rawKey: Self.rawKey), 10_000, "SRC untouched")
    }

    private func fileSize(_ path: String) -> Int64 {
        var status = stat()
        return stat(path, &status) == 0 ? Int64(status.st_size) : 0
    }
}
