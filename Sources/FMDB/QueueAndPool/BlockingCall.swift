import Foundation

/// Runs a call that may block (a lock another call holds, a key derivation, file I/O) for an async caller,
/// on a Dispatch thread rather than one of the cooperative pool's threads, which must never wait.
enum BlockingCall {
    /// The result of `work`, run on a global Dispatch queue. Not cancellable: `work` runs to its end.
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}
