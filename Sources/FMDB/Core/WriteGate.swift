import CSQLCipher
import Foundation

/// A first-come, first-served queue for one database file's write transactions in this process.
///
/// SQLite's busy handler is not fair: writers that find the write lock taken sleep and retry, and a
/// newcomer can take the lock between a waiter's retries, again and again, until the waiter's busy
/// timeout expires (two pool writers on a 2-core machine starved each other past a
/// 2-second limit). The pool's transactions therefore take a ticket here first and run in ticket order;
/// only the ticket holder asks SQLite for the write lock, so `SQLITE_BUSY` can only come from another
/// process (or code that writes outside a pool transaction).
///
/// One gate per database file, shared by every pool on that file in this process (`shared(forPath:)`).
///
/// Sendable: every stored property is read and written only while `lock` is held (a waiter's `ready`,
/// while its own condition is locked).
final class WriteGate: @unchecked Sendable {
    // @unchecked Sendable: `holder` and `queue` are read and written only while `lock` is held; a
    // `Waiter`'s `ready` only while its own condition is locked.

    /// One thread waiting for its turn, woken alone (not with every other waiter) when its turn comes.
    private final class Waiter {
        let thread: pthread_t
        let condition = NSCondition()
        var ready = false
        init(thread: pthread_t) { self.thread = thread }
    }

    private let lock = NSLock()
    /// The thread whose turn it is (nil: nobody's), to refuse a nested turn that could only deadlock.
    private var holder: pthread_t?
    /// Threads waiting, in arrival order.
    private var queue: [Waiter] = []

    init() {}

    /// Runs `body` when the calling thread's turn comes: turns are served in the order they were asked for.
    /// - Parameters:
    ///   - timeout: how long to wait for the turn; nil waits as long as it takes.
    ///   - cancellation: the task of a `performTransaction` call: once it is cancelled (and `wakeWaiters()`
    ///     called), the wait ends.
    /// - Throws: SQLITE_MISUSE when the calling thread already holds the gate (a pool transaction
    ///   started inside another pool transaction on the same file: it could never start), SQLITE_BUSY
    ///   when `timeout` ran out first, `CancellationError` when `cancellation` was cancelled first (`body`
    ///   did not run), or what `body` throws.
    func withTurn<T>(
        timeout: TimeInterval? = nil, cancellation: BlockCancellation? = nil, _ body: () throws -> T
    ) throws -> T {
        try enter(timeout: timeout, cancellation: cancellation)
        defer { leave() }
        return try body()
    }

    /// The deadline of a wait of `seconds`, for any Double a caller set: now for NaN, zero and negatives
    /// (do not wait); nil, no deadline, for infinity and for anything past 10^9 s (about 31 years), which
    /// `NSCondition.wait(until:)` could not take anyway (it traps on a deadline past `Int.max` ns).
    static func deadline(after seconds: TimeInterval) -> Date? {
        guard seconds > 0 else { return Date() }  // also NaN
        return seconds < 1e9 ? Date().addingTimeInterval(seconds) : nil
    }

    /// How long a timed-out wait waited, for its message: "0 s" for NaN and negatives.
    static func waited(_ timeout: TimeInterval?) -> String {
        guard let timeout, timeout > 0 else { return "0 s" }
        return "\(timeout) s"
    }

    private func enter(timeout: TimeInterval?, cancellation: BlockCancellation?) throws {
        let me = pthread_self()
        lock.lock()
        guard let holder else {
            holder = me
            lock.unlock()
            return
        }
        if pthread_equal(holder, me) != 0 {
            lock.unlock()
            throw FMDatabaseError.misuse(
                "A pool transaction was started inside another pool transaction on the same database file, on the "
                    + "same thread: it would wait for itself. Use the database of the enclosing transaction (or a "
                    + "savepoint on it)."
            )
        }
        let waiter = Waiter(thread: me)
        queue.append(waiter)
        lock.unlock()
        let deadline = timeout.flatMap(Self.deadline(after:))
        waiter.condition.lock()
        defer { waiter.condition.unlock() }
        while !waiter.ready {
            // Checked under the waiter's lock, which `wakeWaiters` takes to signal: a cancellation that
            // lands after this check finds this thread waiting, and wakes it.
            let stop: Error
            if cancellation?.isCancelled == true {
                stop = CancellationError()
            } else if let deadline {
                // A cancellation that came while the wait ran out is a cancellation, not a timeout.
                if waiter.condition.wait(until: deadline) || waiter.ready || cancellation?.isCancelled == true {
                    continue
                }
                stop = FMDatabaseError(
                    code: SQLITE_BUSY,
                    message:
                        "The transaction did not start: it waited \(Self.waited(timeout)) (the pool's "
                        + "transactionQueueTimeout) behind this file's earlier transactions in this process.")
            } else {
                waiter.condition.wait()
                continue
            }
            // Leave the queue, unless `leave` has just made this thread the holder: it is then about to set
            // `ready`, and the turn is taken (the caller's body sees the cancellation itself).
            waiter.condition.unlock()
            lock.lock()
            let index = queue.firstIndex { $0 === waiter }
            if let index { queue.remove(at: index) }
            lock.unlock()
            waiter.condition.lock()
            if index != nil { throw stop }
            while !waiter.ready { waiter.condition.wait() }
        }
        // `leave` made this thread the holder before waking it.
    }

    /// Wakes every waiting thread to look at its cancellation (see `enter`); the others wait on.
    func wakeWaiters() {
        lock.lock()
        let waiting = queue
        lock.unlock()
        for waiter in waiting {
            waiter.condition.lock()
            waiter.condition.signal()
            waiter.condition.unlock()
        }
    }

    /// Hands the turn to the longest-waiting thread, or frees the gate.
    private func leave() {
        lock.lock()
        let next = queue.isEmpty ? nil : queue.removeFirst()
        holder = next?.thread
        lock.unlock()
        if let next {
            next.condition.lock()
            next.ready = true
            next.condition.signal()
            next.condition.unlock()
        }
    }

    /// How many threads wait for their turn now.
    var waitingCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return queue.count
    }

    // MARK: - One gate per file

    private final class WeakGate: @unchecked Sendable {
        // @unchecked Sendable: `gate` is only read or written inside `registry.withLock`.
        weak var gate: WriteGate?
        init(_ gate: WriteGate) { self.gate = gate }
    }

    private static let registry = Protected<[String: WeakGate]>([:])

    /// The gate of the database file at `path`, shared by every caller that names the same file (through
    /// any symbolic link to its directory or to itself); a private gate for in-memory and temporary
    /// databases (nil, "", ":memory:"), which no other connection can share.
    static func shared(forPath path: String?) -> WriteGate {
        guard let key = canonicalPath(path) else { return WriteGate() }
        return registry.withLock { gates in
            if let gate = gates[key]?.gate { return gate }
            let gate = WriteGate()
            gates[key] = WeakGate(gate)
            // Drop entries whose pools are gone, so the table does not grow with every file ever pooled.
            gates = gates.filter { $0.value.gate != nil }
            return gate
        }
    }

    /// The file `path` names with symbolic links resolved (the directory's when the file does not exist yet).
    static func canonicalPath(_ path: String?) -> String? {
        guard let path, !path.isEmpty, path != ":memory:" else { return nil }
        if path.hasPrefix("file:") { return path }
        let url = URL(fileURLWithPath: path).standardizedFileURL
        if FileManager.default.fileExists(atPath: url.path) {
            return url.resolvingSymlinksInPath().path
        }
        return url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(url.lastPathComponent)
            .path
    }
}
