// What bench-fmdb and bench-grdb share: the deterministic data (as bench-c makes it), the clock, and
// the peak-memory reading. No SQLite here: each executable links its own.
import Foundation

/// An integer from the environment (the benchmark sizes), or `fallback`.
public func envInt(_ name: String, _ fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
}

/// A monotonic clock in seconds.
public func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

/// The process's peak resident set size in KiB: `VmHWM` of /proc/self/status, which starts afresh at
/// exec. (getrusage's `ru_maxrss` also keeps the peak of the image before exec: the forked python that
/// runs the benchmarks, ~14 MiB, which hid bench-c's own figure.)
public func maxRSS() -> Int {
    if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
        let kb = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
    {
        return kb
    }
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return usage.ru_maxrss
}

/// The shared deterministic data: a 64-bit LCG (Knuth MMIX constants), as bench-c.
public struct LCG {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public mutating func next() -> UInt64 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return state >> 11
    }
}

/// "name-%07d" of `i % 10_000_000`, built in place: a 12-byte (inline, unallocated) String, as
/// snprintf builds it in bench-c.
public func rowText(_ i: Int) -> String {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 12) { buffer in
        var v = i % 10_000_000
        for (k, c) in "name-".utf8.enumerated() { buffer[k] = c }
        for k in stride(from: 11, through: 5, by: -1) {
            buffer[k] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
        }
        return String(decoding: buffer, as: UTF8.self)
    }
}

/// W6 (a service): how many threads serve (one per core), for how long, over how many rows, and what
/// share of requests are write transactions (1 in `writeEvery`).
public enum ServiceWorkload {
    public static var threads: Int { max(1, envInt("BENCH_THREADS", ProcessInfo.processInfo.activeProcessorCount)) }
    public static var seconds: Double { Double(envInt("BENCH_SECONDS", 5)) }
    public static var rows: Int { envInt("BENCH_SERVICE_ROWS", 10_000) }
    public static let writeEvery: UInt64 = 5

    /// "tps=... p50_us=... p99_us=... p99_write_us=... requests=... writes=..." for the request latencies
    /// (seconds) of all threads, and the write transactions' among them apart.
    public static func summary(latencies: [Double], writeLatencies: [Double], elapsed: Double) -> String {
        let sorted = latencies.sorted()
        let writes = writeLatencies.sorted()
        return String(
            format: " tps=%.0f p50_us=%.1f p99_us=%.1f p99_write_us=%.1f requests=%d writes=%d",
            Double(sorted.count) / elapsed, percentile(sorted, permille: 500), percentile(sorted, permille: 990),
            percentile(writes, permille: 990), sorted.count, writes.count)
    }

    /// The `permille`th per-mille of sorted latencies (seconds), in microseconds; 0 with none (as bench-c).
    static func percentile(_ sorted: [Double], permille: Int) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, sorted.count * permille / 1000)] * 1e6
    }

    /// Requests per second completed between `from` and `to` (times as `now()` gives them).
    public static func rate(completions: [Double], from: Double, to: Double) -> Double {
        guard to > from else { return 0 }
        return Double(completions.filter { $0 >= from && $0 < to }.count) / (to - from)
    }
}

/// Per-thread results of a W6 run, merged under a lock.
public final class ServiceResults: @unchecked Sendable {
    // @unchecked Sendable: every property is read and written under `lock`.
    private let lock = NSLock()
    private var latencyList: [Double] = []
    private var writeLatencyList: [Double] = []
    private var completionList: [Double] = []
    private var sum = 0.0
    private var failed = 0

    public init() {}

    /// One thread's results: every request's latency, the write transactions' again, apart.
    public func add(
        latencies: [Double], writeLatencies: [Double], completions: [Double], checksum: Double, failures: Int
    ) {
        lock.lock()
        defer { lock.unlock() }
        latencyList += latencies
        writeLatencyList += writeLatencies
        completionList += completions
        sum += checksum
        failed += failures
    }

    public var latencies: [Double] { lock.withLock { latencyList } }
    public var writeLatencies: [Double] { lock.withLock { writeLatencyList } }
    public var completions: [Double] { lock.withLock { completionList } }
    public var checksum: Double { lock.withLock { sum } }
    public var failures: Int { lock.withLock { failed } }
}
