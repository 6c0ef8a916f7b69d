import FMDB
import Foundation
import Logging
import NotesStore
import XCTest

/// A private temporary directory per test (0700), removed at the end, with the database and key files in it.
final class TestDirectory: Sendable {
    let path: String

    init() throws {
        let template = NSTemporaryDirectory() + "notes-service-test.XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    var database: String { path + "/notes.db" }
}

/// A random raw key as 64 hexadecimal digits.
func randomHexKey() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
}

/// Writes `hexKey` to `path` with mode `mode`, replacing what was there in one step (a file made with
/// O_EXCL beside it, then renamed over it): a reader sees the old key or the new one, never a part.
func writeKeyFile(_ hexKey: String, to path: String, mode: mode_t = 0o600) throws {
    let staging = path + ".new"
    let fd = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    let bytes = Array((hexKey + "\n").utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    guard written == bytes.count, rename(staging, path) == 0 else {
        unlink(staging)
        throw POSIXError(.EIO)
    }
}

/// A provider for a hex key held by the test.
func rawKeyProvider(_ hexKey: String) throws -> RawKeyProvider {
    let bytes = Array(hexKey.utf8)
    return try RawKeyProvider(material: bytes.withUnsafeBytes { KeyMaterial(copying: $0) })
}

/// The resident memory of this process (`VmRSS` in /proc/self/status), in bytes.
func residentMemory() throws -> Int {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { throw CocoaError(.fileReadCorruptFile) }
    return kilobytes * 1024
}

/// The `fmdb-cipher` tool the CI script built (FMDB_CIPHER_TOOL); the tests that run it fail without it.
func cipherTool() throws -> String {
    let tool = ProcessInfo.processInfo.environment["FMDB_CIPHER_TOOL"] ?? ""
    guard FileManager.default.isExecutableFile(atPath: tool) else { throw MissingTool() }
    return tool
}

struct MissingTool: Error, CustomStringConvertible {
    var description: String {
        "set FMDB_CIPHER_TOOL to a built fmdb-cipher (Scripts/test-example does): the operator actions run it"
    }
}

/// Runs the tool with `arguments` (never a key: keys go in files), and returns its exit status (128 + N when
/// signal N killed it, as a shell says) and standard error.
func runTool(_ arguments: [String]) throws -> (status: Int32, errorOutput: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try cipherTool())
    process.arguments = arguments
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let output = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    var errorOutput = String(decoding: output, as: UTF8.self)
    if process.terminationReason == .uncaughtSignal {
        errorOutput += "(the tool was killed by signal \(process.terminationStatus))"
        return (128 + process.terminationStatus, errorOutput)
    }
    return (process.terminationStatus, errorOutput)
}

/// A logger for the service under test: warnings and above, so a test's output shows what went wrong.
func testLogger() -> Logger {
    var logger = Logger(label: "notes-test")
    logger.logLevel = .warning
    return logger
}
