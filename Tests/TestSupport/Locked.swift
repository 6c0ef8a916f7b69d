import Foundation

/// A value guarded by an NSLock, for tests that share state between threads. (Synchronization.Mutex
/// is invisible to ThreadSanitizer on Linux, which would report every access as a race.)
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
