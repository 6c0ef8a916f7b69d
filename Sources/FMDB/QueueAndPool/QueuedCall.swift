import Foundation

/// The continuation of one queue or pool `perform` / `performTransaction` call, waiting for its work's turn
/// (on the queue, or on a Dispatch thread for a pool): a cancellation that comes before the turn resumes the
/// caller at once with `CancellationError`, and the turn, when it comes, does nothing. Once the turn has
/// started, the call ends as its block does.
///
/// Sendable: its one mutable value is `Protected`.
final class QueuedCall<T: Sendable>: Sendable {
    private enum Phase {
        case idle
        case cancelled
        case waiting(CheckedContinuation<T, Error>)
        case running(CheckedContinuation<T, Error>)
        case done
    }

    private let phase = Protected(Phase.idle)

    init() {}

    /// Hands over the caller's continuation; resumes it at once when the call was cancelled already.
    func attach(_ continuation: CheckedContinuation<T, Error>) {
        let cancelled = phase.withLock { phase in
            guard case .cancelled = phase else {
                phase = .waiting(continuation)
                return false
            }
            phase = .done
            return true
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
    }

    /// The turn came: true when the call still waits for it (it runs now), false when it was cancelled.
    func start() -> Bool {
        phase.withLock { phase in
            guard case .waiting(let continuation) = phase else { return false }
            phase = .running(continuation)
            return true
        }
    }

    /// The call ran: the caller resumes with `result`.
    func finish(_ result: Result<T, Error>) {
        let continuation: CheckedContinuation<T, Error>? = phase.withLock { phase in
            guard case .running(let continuation) = phase else { return nil }
            phase = .done
            return continuation
        }
        continuation?.resume(with: result)
    }

    /// The task was cancelled: a call still waiting for its turn ends now with `CancellationError`.
    func cancel() {
        let continuation: CheckedContinuation<T, Error>? = phase.withLock { phase in
            switch phase {
            case .idle:
                phase = .cancelled
                return nil
            case .waiting(let continuation):
                phase = .done
                return continuation
            case .cancelled, .running, .done:
                return nil
            }
        }
        continuation?.resume(throwing: CancellationError())
    }
}
