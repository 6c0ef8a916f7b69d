import FMDB
import Foundation
import XCTest

/// A unique temporary directory for one test, removed when the test is done.
public final class TemporaryDirectory {
    public let url: URL

    public init(_ label: String = "fmdb") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    public func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    /// Every file in the directory, and their bytes (for scanning for plaintext).
    public func allFileBytes() -> [(String, Data)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.compactMap { name in
            guard let data = FileManager.default.contents(atPath: path(name)) else { return nil }
            return (name, data)
        }
    }
}

extension Data {
    /// Whether these bytes contain `needle` anywhere.
    public func contains(bytes needle: String) -> Bool {
        range(of: Data(needle.utf8)) != nil
    }
}

/// The NSError view of an error (domain, code), as FMDB users see it.
public func nsError(_ error: Error) -> NSError { error as NSError }

/// Runs a command and returns its exit status and output. Output goes through temporary files, so a
/// child that writes a lot to both streams can never block on a full pipe.
@discardableResult
public func runProcess(
    _ executable: String,
    _ arguments: [String],
    input: String? = nil,
    environment: [String: String]? = nil
) throws -> (status: Int32, stdout: String, stderr: String) {
    let scratch = try TemporaryDirectory("fmdb-process")
    let outURL = scratch.url.appendingPathComponent("stdout")
    let errURL = scratch.url.appendingPathComponent("stderr")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    let outHandle = try FileHandle(forWritingTo: outURL)
    let errHandle = try FileHandle(forWritingTo: errURL)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    // A child that traps must end at once: Swift's crash backtracer would make it linger.
    var childEnvironment = environment ?? ProcessInfo.processInfo.environment
    childEnvironment["SWIFT_BACKTRACE"] = "enable=no"
    process.environment = childEnvironment
    let inPipe = Pipe()
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = inPipe
    try process.run()
    if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try inPipe.fileHandleForWriting.close()
    process.waitUntilExit()
    try outHandle.close()
    try errHandle.close()
    let out = (try? Data(contentsOf: outURL)) ?? Data()
    let err = (try? Data(contentsOf: errURL)) ?? Data()
    return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
}

/// The path of an executable on PATH, or nil.
public func which(_ name: String) -> String? {
    let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
    for dir in paths {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// The two ways every queue and pool behaviour is tested.
public enum StorageMode: String, CaseIterable, Sendable {
    case plain, encrypted

    /// A fast provider for tests (PBKDF2 with few iterations), or nil for plain.
    public var keyProvider: (any KeyProvider)? {
        switch self {
        case .plain: return nil
        case .encrypted:
            return PBKDF2KeyProvider(passphrase: "test passphrase", digest: .sha256, unsafeIterations: 1_000)
        }
    }

    /// A queue on `path`, keyed with ``keyProvider`` when encrypted.
    public func makeQueue(at path: String) throws -> FMDatabaseQueue {
        if let keyProvider { return try FMDatabaseQueue(path: path, keyProvider: keyProvider) }
        return try XCTUnwrap(FMDatabaseQueue(path: path), "a queue on \(path)")
    }

    /// A pool on `path`, keyed with ``keyProvider`` when encrypted.
    public func makePool(at path: String) throws -> FMDatabasePool {
        if let keyProvider { return try FMDatabasePool(path: path, keyProvider: keyProvider) }
        return FMDatabasePool(path: path)
    }
}

/// Runs the `sqlcipher` shell on `path` with `script` on standard input. SQLCipher 4's shell answers
/// `PRAGMA key` (and `rekey`, `cipher_compatibility`) with a line "ok" that 3.4.1's does not print: those
/// answers go to /dev/null, so the output is the same on both lines.
public func runSQLCipherShell(_ shell: String, _ path: String, _ script: String) throws -> (
    status: Int32, stdout: String, stderr: String
) {
    let quiet = script.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
        let lower = line.lowercased()
        guard
            lower.hasPrefix("pragma key") || lower.hasPrefix("pragma rekey")
                || lower.hasPrefix("pragma cipher_compatibility")
        else {
            return String(line)
        }
        return ".output /dev/null\n\(line)\n.output stdout"
    }
    return try runProcess(shell, [path], input: quiet.joined(separator: "\n"))
}

/// The `sqlcipher` shell of the SQLCipher line the tests link: the first `sqlcipher` on PATH, when it runs
/// the same SQLCipher as the library (the `PRAGMA cipher_version` of both). A line without a shell of its
/// own (one built from an amalgamation without shell.c) finds another line's shell on PATH, or none: the
/// tests that compare with this line's shell then skip, saying which shell they found. A missing shell on
/// a line whose package has one still fails the test (`apt-get install sqlcipher`).
public func lineShell() throws -> String {
    let shell = try XCTUnwrap(which("sqlcipher"), "the sqlcipher shell of the linked line (apt-get install sqlcipher)")
    let linked = LineShellCheck.linkedVersion
    let reported = LineShellCheck.reportedVersion(of: shell)
    guard reported == linked else {
        throw XCTSkip(
            "the sqlcipher shell on PATH (\(shell)) runs SQLCipher \(reported ?? "?"), not the linked "
                + "\(linked ?? "?"): this line has no shell of its own")
    }
    return shell
}

/// The versions `lineShell()` compares, each asked once per process.
private enum LineShellCheck {
    static let linkedVersion: String? = {
        let db = FMDatabase(path: nil)
        guard db.open() else { return nil }
        defer { db.close() }
        return db.cipherVersion
    }()

    private static let answers = Locked<[String: String]>([:])

    static func reportedVersion(of shell: String) -> String? {
        if let known = answers.withLock({ $0[shell] }) { return known }
        guard let result = try? runProcess(shell, [":memory:"], input: "PRAGMA cipher_version;\n"),
            result.status == 0
        else { return nil }
        let version = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        answers.withLock { $0[shell] = version }
        return version
    }
}
