import Foundation

/// A meeting point that makes "at least `parties` threads inside at once" certain instead of likely: each
/// `arrive()` returns once `parties` calls have arrived in all (at once for every later call). A wait ends
/// after `patience` seconds at most, returning false, so a test that cannot meet fails instead of hanging.
public final class Rendezvous: @unchecked Sendable {
    // @unchecked Sendable: `arrived` is only read and written with `condition` locked.
    private let condition = NSCondition()
    private var arrived = 0
    private let parties: Int
    private let patience: TimeInterval

    public init(parties: Int, patience: TimeInterval = 60) {
        self.parties = parties
        self.patience = patience
    }

    /// Counts this call, then waits until `parties` calls have arrived; false when the patience ran out.
    @discardableResult
    public func arrive() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        arrived += 1
        if arrived >= parties {
            condition.broadcast()
            return true
        }
        let deadline = Date().addingTimeInterval(patience)
        while arrived < parties {
            if !condition.wait(until: deadline) { return arrived >= parties }
        }
        return true
    }
}

/// Runs `body(0)` ... `body(count - 1)` on `count` threads of their own, all at once (unlike
/// `DispatchQueue.concurrentPerform`, which runs as many at a time as there are cores), and returns when
/// every one has returned.
public func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread.detachNewThread {
            body(index)
            done.leave()
        }
    }
    done.wait()
}
