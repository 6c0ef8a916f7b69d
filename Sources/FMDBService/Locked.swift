import Foundation

/// A value behind an `NSLock`: the service's one kind of lock. Not `Synchronization.Mutex`, which on Linux
/// waits on a futex ThreadSanitizer does not see (it then reports every access under it as a race); an
/// `NSLock` is a pthread mutex, which it does.
///
/// @unchecked Sendable: `value` is read and written only inside `withLock`, under `lock`.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, under the lock.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
