import Foundation

/// Starts `executable`, waits up to `delay` seconds, SIGKILLs it if it is still running, and returns its
/// standard output and whether it was killed. `onceItPrints`: the delay starts when the child has written its
/// first output instead of when it starts. `environment` is merged over this process's.
public func runAndKill(
    _ executable: String,
    _ arguments: [String],
    after delay: Double,
    onceItPrints: Bool = false,
    environment: [String: String] = [:]
) throws -> (output: String, killed: Bool) {
    let scratch = try TemporaryDirectory("fmdb-kill-output")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    var childEnvironment = ProcessInfo.processInfo.environment
    childEnvironment.merge(environment) { _, new in new }
    // A child that traps must end at once: Swift's crash backtracer would make it linger.
    childEnvironment["SWIFT_BACKTRACE"] = "enable=no"
    process.environment = childEnvironment
    let out = scratch.url.appendingPathComponent("stdout")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    let handle = try FileHandle(forWritingTo: out)
    process.standardOutput = handle
    process.standardError = FileHandle.nullDevice
    try process.run()
    if onceItPrints {
        // The delay counts from the child's first output (its first acknowledged step), so on a loaded
        // machine a kill still lands after it made progress. Bounded, so a child that never prints ends.
        let patience = Date().addingTimeInterval(120)
        while process.isRunning, Date() < patience,
            ((try? FileManager.default.attributesOfItem(atPath: out.path)[.size] as? Int) ?? 0) == 0
        {
            Thread.sleep(forTimeInterval: 0.002)
        }
    }
    // Polled, so a child that finishes early is not waited for the whole delay.
    let deadline = Date().addingTimeInterval(delay)
    while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.002) }
    let killed = process.isRunning
    if killed { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    try handle.close()
    let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
    return (text, killed)
}

/// The path of an executable product built with the tests. The test targets declare the executables
/// they run as dependencies in Package.swift, so SwiftPM builds them into the same build folder as the
/// test bundle (`.build/<config>/`): that folder, and only it, is searched. Nil when it is not there.
public func builtProduct(_ name: String) -> String? {
    // The test runner runs the .xctest bundle (a file on Linux; on macOS the binary is inside it).
    var bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    while bundle.pathExtension != "xctest", bundle.path != "/" { bundle.deleteLastPathComponent() }
    guard bundle.pathExtension == "xctest" else { return nil }
    let buildFolder = bundle.deletingLastPathComponent()
    let candidate = buildFolder.appendingPathComponent(name).path
    return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
}

/// The `fmdb-cipher` the tool's tests run: the binary the environment variable `FMDB_CIPHER_TOOL` names
/// (an absolute path; `Scripts/test` names the one `Scripts/install` installed, so the tests run what users
/// install, release and statically linked), else the one built with the tests. Nil when the named binary
/// is not an executable file: a test never falls back to another binary than the one it was told to run.
public func toolUnderTest() -> String? {
    if let named = ProcessInfo.processInfo.environment["FMDB_CIPHER_TOOL"], !named.isEmpty {
        return named.hasPrefix("/") && FileManager.default.isExecutableFile(atPath: named) ? named : nil
    }
    return builtProduct("fmdb-cipher")
}

/// A small deterministic random number generator (SplitMix64): the same "random" cases every run.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Reads `output`, the standard output of the started `process`, until it holds `word`: `found` is true
/// then, false when the process ends or `seconds` pass first. `seen` is everything read.
public func waitForOutput(
    of process: Process, on output: Pipe, containing word: String, within seconds: Double
) -> (found: Bool, seen: String) {
    var seen = Data()
    let deadline = Date().addingTimeInterval(seconds)
    while !String(decoding: seen, as: UTF8.self).contains(word) {
        guard Date() < deadline, process.isRunning else { return (false, String(decoding: seen, as: UTF8.self)) }
        seen.append(output.fileHandleForReading.availableData)
    }
    return (true, String(decoding: seen, as: UTF8.self))
}
