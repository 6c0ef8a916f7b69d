import Foundation

/// Idle elements handed out one caller at a time, never more than a limit at once: the part of a pool that
/// counts and waits, and nothing else. The owner creates, checks and closes its elements (connections);
/// this type decides when a caller may take an idle element, when it may create one, and when it waits.
///
/// A checkout (`checkOut(isCancelled:take:onDeadlock:)`) returns an idle element (a `Lease`) or a
/// `Permit` to create one; an element being created counts toward the limit until the owner turns its
/// permit into a lease (`lease(_:with:generation:)`) or gives it back (`abandon(_:)`). A lease ends in
/// `checkIn(_:_:)`, which keeps the element for the next caller unless it belongs to an older generation
/// (`newGeneration(idle:)`: every element handed out before is then dropped when it comes back).
/// `pause()` waits until nothing is checked out or being created and stops checkouts until
/// `resume(newGeneration:idle:)`: a change no element may see half done (a rekey).
///
/// Which idle element a caller takes is the owner's policy, passed to each checkout (`take`); so is what a
/// cancelled wait means (`isCancelled`, re-tested after each wake: whoever cancels calls
/// `wakeWaiters()` afterwards, which takes the lock first, so a cancellation that lands after a waiter's
/// test finds it waiting and wakes it).
///
/// Lock order: an owner may call this type while holding its own lock; `take` and `isCancelled` run under
/// this type's lock and must take no lock but a leaf one.
final class BoundedPool<Element>: @unchecked Sendable {
    // @unchecked Sendable: every stored var is read and written only while `condition` is locked, and
    // elements pass between threads only through it (an element is used by one caller at a time).

    /// An element checked out to the calling thread; give it back with `checkIn(_:_:)` once.
    struct Lease {
        let element: Element
        /// The generation the element belongs to: an older one than the pool's is dropped at check-in.
        let generation: Int
        fileprivate let id: Int
    }

    /// The right to create one element, counted toward the limit until turned into a lease or abandoned.
    struct Permit {
        /// The pool's generation when the permit was granted.
        let generation: Int
    }

    /// What a checkout got: an idle element, or a permit to create one.
    enum Checkout {
        case idle(Lease)
        case create(Permit)
    }

    /// What a caller does with a leased element at check-in.
    enum Return {
        /// Keep `element` (the leased one, possibly updated) for the next caller, unless its generation is old.
        case reuse(Element)
        /// The element is gone (the owner closed it or will): its place is free.
        case discard
    }

    /// The pool's counts now and its counters since it was created, read together under the lock.
    struct Statistics: Equatable, Sendable {
        /// Elements idle in the pool.
        var idle = 0
        /// Elements checked out (leases not yet checked in).
        var checkedOut = 0
        /// Elements being created (permits not yet turned into leases or abandoned): they count toward the limit.
        var creating = 0
        /// Callers waiting in a checkout now (the limit reached, or the pool paused).
        var waiters = 0
        /// The most elements at once (idle, checked out and being created); 0: no limit.
        var limit = 0
        /// Bumped by `newGeneration` and `resume`: elements of older generations are dropped at check-in.
        var generation = 0
        /// Whether checkouts wait for `resume` (see `pause`).
        var isPaused = false
        /// Checkouts that returned an idle element or a permit.
        var checkouts = 0
        /// Checkouts that waited at least once (including ones that ended cancelled).
        var waits = 0
        /// The time those checkouts spent waiting, on a monotonic clock.
        var waitTime: Duration = .zero
        /// Permits turned into leases: elements the owner created for the pool.
        var creations = 0
        /// Elements the pool dropped: checked in under an older generation or as `.discard`, given up by
        /// `exchange`, or idle when a new generation began. (Elements `pause` hands to its caller are not.)
        var discards = 0
    }

    private let condition = NSCondition()
    private var idle: [Element] = []
    /// The thread of each lease not yet checked in, by lease id: a caller whose own thread holds every
    /// element could never be served (see `checkOut`).
    private var holders: [Int: pthread_t] = [:]
    private var nextLeaseID = 0
    private var counters = Statistics()

    /// A pool with no idle element; `limit` 0 means no limit.
    init(limit: Int = 0) {
        counters.limit = max(0, limit)
    }

    /// The counts and counters, read at one moment.
    var statistics: Statistics {
        locked {
            var snapshot = counters
            snapshot.idle = idle.count
            snapshot.checkedOut = holders.count
            return snapshot
        }
    }

    /// The most elements at once (idle, checked out and being created); 0 means no limit. Raising it wakes the
    /// callers waiting for it; lowering it below what is open closes nothing, and no new element is created
    /// until the count falls below it.
    var limit: Int {
        get { locked { counters.limit } }
        set {
            locked { counters.limit = max(0, newValue) }
            condition.broadcast()
        }
    }

    /// The current generation.
    var generation: Int { locked { counters.generation } }

    /// Whether the calling thread holds a lease.
    var isHeldByCurrentThread: Bool {
        let me = pthread_self()
        return locked { holders.values.contains { pthread_equal($0, me) != 0 } }
    }

    /// Checks out an idle element (chosen by `take`, which removes it from the idle elements it is given,
    /// or returns nil to take none), or a permit to create one while the limit allows; otherwise waits until an
    /// element comes back, the limit rises or the pool resumes.
    ///
    /// - Parameters:
    ///   - isCancelled: Tested first and after each wake: once true, the checkout ends without taking
    ///     anything (whoever cancels then calls `wakeWaiters`).
    ///   - take: The owner's choice among idle elements (run under the lock).
    ///   - onDeadlock: Called, outside the lock, when the calling thread holds every element and none is being
    ///     created: this checkout could never be served. It must not return (a programming error).
    /// - Throws: `CancellationError` when `isCancelled` returned true.
    func checkOut(
        isCancelled: () -> Bool = { false }, take: (inout [Element]) -> Element?, onDeadlock: (Int) -> Never
    ) throws -> Checkout {
        let me = pthread_self()
        var waitedSince: ContinuousClock.Instant?
        condition.lock()
        let outcome: Checkout?
        while true {
            // Tested first: a caller cancelled before it got an element neither takes one nor creates one.
            if isCancelled() {
                outcome = nil
                break
            }
            if !counters.isPaused, let element = take(&idle) {
                outcome = .idle(registerLease(element, generation: counters.generation, thread: me))
                break
            }
            if !counters.isPaused, counters.limit == 0 || openCount < counters.limit {
                counters.creating += 1
                outcome = .create(Permit(generation: counters.generation))
                break
            }
            if !counters.isPaused, !holders.isEmpty, counters.creating == 0,
                holders.values.allSatisfy({ pthread_equal($0, me) != 0 })
            {
                let limit = counters.limit
                condition.unlock()
                onDeadlock(limit)
            }
            if waitedSince == nil {
                waitedSince = .now
                counters.waits += 1
            }
            counters.waiters += 1
            condition.wait()
            counters.waiters -= 1
        }
        if let waitedSince { counters.waitTime += ContinuousClock.now - waitedSince }
        if outcome != nil { counters.checkouts += 1 }
        condition.unlock()
        guard let outcome else { throw CancellationError() }
        return outcome
    }

    /// Turns a permit into a lease of the element the caller created with it. `generation`: the generation the
    /// element belongs to (the one the caller read with the settings it created it with; by default the
    /// permit's).
    func lease(_ element: Element, with permit: Permit, generation: Int? = nil) -> Lease {
        locked {
            counters.creating -= 1
            counters.creations += 1
            return registerLease(element, generation: generation ?? permit.generation, thread: pthread_self())
        }
    }

    /// Gives back a permit whose element could not be created (or was refused): its place is free.
    func abandon(_ permit: Permit) {
        locked { counters.creating -= 1 }
        condition.broadcast()
    }

    /// Drops a leased element and keeps its place, as a permit to create its replacement at once, without
    /// waiting behind other callers.
    func exchange(_ lease: Lease) -> Permit {
        locked {
            removeLease(lease)
            counters.discards += 1
            counters.creating += 1
            return Permit(generation: counters.generation)
        }
    }

    /// Ends a lease: keeps the element for the next caller (`.reuse`) unless its generation is older than the
    /// pool's, and wakes the waiters.
    ///
    /// - Returns: whether the element was kept; when not, the caller disposes of it (closes it).
    @discardableResult
    func checkIn(_ lease: Lease, _ disposition: Return) -> Bool {
        let kept: Bool = locked {
            removeLease(lease)
            if case .reuse(let element) = disposition, lease.generation == counters.generation {
                idle.append(element)
                return true
            }
            counters.discards += 1
            return false
        }
        condition.broadcast()
        return kept
    }

    /// Adds an element the owner created outside a checkout (at init) to the idle ones.
    func add(_ element: Element) {
        locked { idle.append(element) }
        condition.broadcast()
    }

    /// Starts a new generation: the idle elements are returned (for the caller to close) and replaced by
    /// `idle`, and elements checked out now are dropped when they come back. Those still count toward the
    /// limit until then: of `idle`, only as many are kept as the limit leaves room for, and the rest are
    /// returned too (otherwise each new generation while blocks run would add elements past the limit).
    func newGeneration(idle newIdle: [Element] = []) -> [Element] {
        let old: [Element] = locked {
            counters.generation += 1
            let room =
                counters.limit == 0 ? newIdle.count : max(0, counters.limit - holders.count - counters.creating)
            let surplus = Array(newIdle.dropFirst(room))
            counters.discards += idle.count + surplus.count
            defer { idle = Array(newIdle.prefix(room)) }
            return idle + surplus
        }
        condition.broadcast()
        return old
    }

    /// Waits until no element is checked out or being created and the pool is not paused, then pauses it:
    /// checkouts wait until `resume`. Returns the idle elements, which leave the pool (the caller owns them).
    /// A caller holding a lease would wait for itself: check `isHeldByCurrentThread` first.
    func pause() -> [Element] {
        locked {
            while !isDrained { condition.wait() }
            return pauseNow()
        }
    }

    /// `pause` without waiting: pauses the pool and returns its idle elements when no element is checked out
    /// or being created and it is not paused; otherwise returns nil and changes nothing. For an owner that
    /// must decide under its own lock (`waitUntilDrained` waits for the next chance).
    func pauseIfDrained() -> [Element]? {
        locked { isDrained ? pauseNow() : nil }
    }

    /// Waits until no element is checked out or being created and the pool is not paused (another checkout may
    /// come first: `pauseIfDrained` can still fail).
    func waitUntilDrained() {
        locked {
            while !isDrained { condition.wait() }
        }
    }

    /// Ends a pause: `idle` becomes the idle elements, of a new generation when `newGeneration` (what was
    /// handed out before the pause is dropped when it comes back), and the waiters are woken. Returns the
    /// elements made idle during the pause (`add`, `newGeneration`), which it replaces, for the caller to close.
    @discardableResult
    func resume(newGeneration: Bool = false, idle newIdle: [Element] = []) -> [Element] {
        let replaced: [Element] = locked {
            precondition(counters.isPaused, "BoundedPool.resume without pause")
            counters.isPaused = false
            if newGeneration { counters.generation += 1 }
            counters.discards += idle.count
            defer { idle = newIdle }
            return idle
        }
        condition.broadcast()
        return replaced
    }

    /// Wakes every waiting caller, so that a cancelled one stops waiting. Taking the lock first orders this
    /// after a waiter's test of its cancellation.
    func wakeWaiters() {
        locked {}
        condition.broadcast()
    }

    // MARK: - Under the lock

    private var openCount: Int { idle.count + holders.count + counters.creating }

    private var isDrained: Bool { !counters.isPaused && holders.isEmpty && counters.creating == 0 }

    private func pauseNow() -> [Element] {
        counters.isPaused = true
        defer { idle.removeAll() }
        return idle
    }

    private func registerLease(_ element: Element, generation: Int, thread: pthread_t) -> Lease {
        nextLeaseID += 1
        holders[nextLeaseID] = thread
        return Lease(element: element, generation: generation, id: nextLeaseID)
    }

    private func removeLease(_ lease: Lease) {
        precondition(holders.removeValue(forKey: lease.id) != nil, "BoundedPool: a lease was checked in twice")
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }
}
