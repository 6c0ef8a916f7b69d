import Foundation

/// Fault injection for the reliability tests: an `LD_PRELOAD` shim (Tests/FaultInjection/fault_shim.c,
/// compiled here once per test process with the toolchain's C compiler) that fails, or kills the process
/// at, the Nth call that changes a file under one folder: every write, sync, truncate, rename, link and
/// unlink of a command, one after another.
///
/// ```swift
/// let shim = try FaultShim.shared()
/// let plan = try shim.plan(tool, arguments, folder: work, environment: env)     // every counted call
/// for point in plan.indices {
///     let result = try shim.run(tool, arguments, folder: work, at: point + 1, mode: .eio, environment: env)
///     // check what result.status says against which key opens the file
/// }
/// ```
public final class FaultShim: Sendable {
    /// What happens at the chosen call.
    public enum Mode: String, CaseIterable, Sendable {
        /// That call fails with EIO, once.
        case eio
        /// That call fails with ENOSPC, once.
        case enospc
        /// That call and every later write, sync and rename fail with ENOSPC: a disk that stays full.
        case full
        /// The process is SIGKILLed before that call runs.
        case kill
    }

    /// One counted call of a run without faults: its operation and file.
    public struct Call: Sendable, CustomStringConvertible {
        public let operation: String
        public let path: String
        public var description: String { "\(operation) \(path)" }
    }

    /// The compiled shim.
    public let library: String

    private init(library: String) {
        self.library = library
    }

    private static let compiled = Locked<Result<FaultShim, Error>?>(nil)

    /// The shim, compiled on first use (cc or clang on PATH). Throws when no C compiler is there.
    public static func shared(file: String = #filePath) throws -> FaultShim {
        try compiled.withLock { state in
            if let state { return try state.get() }
            let result = Result { try compile(file: file) }
            state = result
            return try result.get()
        }
    }

    private static func compile(file: String) throws -> FaultShim {
        // Tests/TestSupport/FaultInjection.swift → Tests/FaultInjection/fault_shim.c
        let source = URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FaultInjection/fault_shim.c").path
        guard FileManager.default.fileExists(atPath: source) else {
            throw FaultShimError("the shim's source is not at \(source)")
        }
        guard let compiler = which("cc") ?? which("clang") ?? which("gcc") else {
            throw FaultShimError("no C compiler (cc, clang, gcc) on PATH to build the fault-injection shim")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fmdb-fault-shim-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let library = folder.appendingPathComponent("libfmdbfault.so").path
        let built = try runProcess(compiler, ["-shared", "-fPIC", "-O1", "-o", library, source, "-ldl"])
        guard built.status == 0 else { throw FaultShimError("the shim did not compile: \(built.stderr)") }
        return FaultShim(library: library)
    }

    /// The environment that runs a command under the shim.
    public func environment(
        folder: String, at point: Int = 0, mode: Mode = .eio, log: String? = nil, base: [String: String]
    ) -> [String: String] {
        var environment = base
        environment["LD_PRELOAD"] = library
        environment["FMDB_FAULT_DIR"] = URL(fileURLWithPath: folder).standardizedFileURL.resolvingSymlinksInPath().path
        environment["FMDB_FAULT_AT"] = String(point)
        environment["FMDB_FAULT_MODE"] = mode.rawValue
        environment["FMDB_FAULT_LOG"] = log
        return environment
    }

    /// Runs the command once without a fault and returns every call it made under `folder`, in order: the
    /// points of a sweep. The command's own result must be a success for the plan to mean anything.
    public func plan(
        _ executable: String, _ arguments: [String], folder: String, environment base: [String: String]
    ) throws -> (calls: [Call], status: Int32, stderr: String) {
        let scratch = try TemporaryDirectory("fmdb-fault-plan")
        let log = scratch.path("calls")
        let result = try runProcess(
            executable, arguments, input: "",
            environment: environment(folder: folder, log: log, base: base))
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let calls = text.split(separator: "\n").compactMap { line -> Call? in
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            guard parts.count == 3 else { return nil }
            return Call(operation: parts[1], path: parts[2])
        }
        return (calls, result.status, result.stderr)
    }

    /// Runs the command with `mode` at call number `point` (1-based).
    public func run(
        _ executable: String, _ arguments: [String], folder: String, at point: Int, mode: Mode,
        environment base: [String: String]
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        try runProcess(
            executable, arguments, input: "",
            environment: environment(folder: folder, at: point, mode: mode, base: base))
    }
}

public struct FaultShimError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
