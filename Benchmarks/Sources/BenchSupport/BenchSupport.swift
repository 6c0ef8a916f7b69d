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
