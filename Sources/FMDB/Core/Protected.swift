import Foundation

/// A value guarded by a lock: the library's one mutual-exclusion primitive for small shared state.
///
/// Built on `NSLock` (a pthread mutex) rather than `Synchronization.Mutex`, because on Linux `Mutex`
/// locks with raw futex calls that ThreadSanitizer does not see, so every access through it is
/// reported as a race; the test suite runs under ThreadSanitizer with no reports.
final class Protected<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only read or written while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
