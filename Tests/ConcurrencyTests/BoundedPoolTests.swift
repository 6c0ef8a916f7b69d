@testable import FMDB
import Foundation
import XCTest

/// The pool's counting and waiting part alone (`BoundedPool`), with integers for elements: the limit holds
/// under contention, a waiter is woken by a check-in, a raised limit, a cancellation or a resume, a paused pool
/// hands out nothing, an old generation's element is dropped at check-in, and the counters add up.
final class BoundedPoolTests: XCTestCase {
    private typealias Pool = BoundedPool<Int>

    /// Takes the most recently checked-in element (the pool's usual policy).
    private static func takeLast(_ idle: inout [Int]) -> Int? { idle.popLast() }

    private static func noDeadlock(_ limit: Int) -> Never {
        preconditionFailure("BoundedPoolTests: unexpected deadlock report (limit \(limit))")
    }

    /// Runs a checkout on a new thread; the returned box holds its outcome once `done` is signalled.
    private func checkOutOnAnotherThread(
        _ pool: Pool, isCancelled: @escaping @Sendable () -> Bool = { false }
    ) -> (outcome: Protected<Result<Pool.Checkout, Error>?>, done: DispatchSemaphore) {
        let outcome = Protected<Result<Pool.Checkout, Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let result = Result {
                try pool.checkOut(isCancelled: isCancelled, take: Self.takeLast, onDeadlock: Self.noDeadlock)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        return (outcome, done)
    }

    /// Waits (up to 5 s) until `count` callers wait in `pool`.
    private func waitForWaiters(_ pool: Pool, _ count: Int, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(5)
        while pool.statistics.waiters < count, Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
        XCTAssertEqual(pool.statistics.waiters, count, "waiters", file: file, line: line)
    }

    private func checkOut(_ pool: Pool) throws -> Pool.Checkout {
        try pool.checkOut(take: Self.takeLast, onDeadlock: Self.noDeadlock)
    }

    /// Checks out an idle element, or creates `next` with the permit granted.
    private func lease(_ pool: Pool, creating next: Int) throws -> Pool.Lease {
        switch try checkOut(pool) {
        case .idle(let lease): return lease
        case .create(let permit): return pool.lease(next, with: permit)
        }
    }

    func testTheLimitHoldsUnderContentionAndTheCountersAddUp() throws {
        let pool = Pool(limit: 3)
        let threads = 8
        let rounds = 200
        struct Tally {
            var inUse = 0
            var mostInUse = 0
            var created = 0
            var reused = 0
            var elements = Set<Int>()
        }
        let tally = Protected(Tally())
        let group = DispatchGroup()
        for _ in 0..<threads {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for _ in 0..<rounds {
                    let checkout: Pool.Checkout
                    do {
                        checkout = try pool.checkOut(take: Self.takeLast, onDeadlock: Self.noDeadlock)
                    } catch {
                        return
                    }
                    let lease: Pool.Lease
                    switch checkout {
                    case .idle(let idle):
                        lease = idle
                        tally.withLock { $0.reused += 1 }
                    case .create(let permit):
                        let element = tally.withLock { tally -> Int in
                            tally.created += 1
                            return tally.created
                        }
                        lease = pool.lease(element, with: permit)
                    }
                    tally.withLock { tally in
                        tally.inUse += 1
                        tally.mostInUse = max(tally.mostInUse, tally.inUse)
                        tally.elements.insert(lease.element)
                    }
                    usleep(20)
                    tally.withLock { $0.inUse -= 1 }
                    pool.checkIn(lease, .reuse(lease.element))
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success, "a caller never got an element (lost wake-up?)")
        let seen = tally.withLock { $0 }
        let now = pool.statistics
        XCTAssertLessThanOrEqual(seen.mostInUse, 3, "more elements in use at once than the limit")
        XCTAssertLessThanOrEqual(seen.created, 3, "more elements created than the limit")
        XCTAssertEqual(seen.elements.count, seen.created, "every element used was one the pool handed out")
        XCTAssertEqual(now.checkouts, threads * rounds)
        XCTAssertEqual(now.creations, seen.created)
        XCTAssertEqual(seen.created + seen.reused, threads * rounds)
        XCTAssertEqual(now.idle, seen.created, "every element came back")
        XCTAssertEqual(now.checkedOut, 0)
        XCTAssertEqual(now.creating, 0)
        XCTAssertEqual(now.waiters, 0)
        XCTAssertEqual(now.discards, 0)
        XCTAssertGreaterThan(now.waits, 0, "8 callers for 3 elements: some waited")
        XCTAssertGreaterThan(now.waitTime, .zero)
    }

    /// Two threads pass one element back and forth many times: a check-in that did not wake the waiter
    /// would leave one waiting for ever.
    func testACheckInAlwaysWakesTheWaiter() throws {
        let pool = Pool(limit: 1)
        let group = DispatchGroup()
        for thread in 0..<2 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for _ in 0..<2_000 {
                    guard
                        let checkout = try? pool.checkOut(take: Self.takeLast, onDeadlock: Self.noDeadlock)
                    else { return }
                    let lease: Pool.Lease
                    switch checkout {
                    case .idle(let idle): lease = idle
                    case .create(let permit): lease = pool.lease(thread, with: permit)
                    }
                    pool.checkIn(lease, .reuse(lease.element))
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success, "a waiter was never woken")
        XCTAssertEqual(pool.statistics.checkouts, 4_000)
        XCTAssertEqual(pool.statistics.creations, 1)
    }

    func testAWaiterGetsTheElementCheckedIn() throws {
        let pool = Pool(limit: 1)
        let held = try lease(pool, creating: 7)
        let waiter = checkOutOnAnotherThread(pool)
        waitForWaiters(pool, 1)
        XCTAssertNil(waiter.outcome.withLock { $0 }, "it waits while the only element is out")
        pool.checkIn(held, .reuse(held.element))
        XCTAssertEqual(waiter.done.wait(timeout: .now() + 5), .success)
        guard case .idle(let lease) = try waiter.outcome.withLock({ $0 })?.get() else {
            return XCTFail("the waiter should get the element checked in")
        }
        XCTAssertEqual(lease.element, 7)
        XCTAssertEqual(pool.statistics.waits, 1)
        XCTAssertGreaterThan(pool.statistics.waitTime, .zero)
    }

    func testElementsBeingCreatedCountTowardTheLimit() throws {
        let pool = Pool(limit: 1)
        guard case .create(let permit) = try checkOut(pool) else { return XCTFail("an empty pool grants a permit") }
        XCTAssertEqual(pool.statistics.creating, 1)
        let waiter = checkOutOnAnotherThread(pool)
        waitForWaiters(pool, 1)
        pool.abandon(permit)  // The creation failed: its place is free.
        XCTAssertEqual(waiter.done.wait(timeout: .now() + 5), .success)
        guard case .create = try waiter.outcome.withLock({ $0 })?.get() else {
            return XCTFail("the waiter should get the abandoned place")
        }
        XCTAssertEqual(pool.statistics.creating, 1)
        XCTAssertEqual(pool.statistics.creations, 0)
    }

    func testRaisingTheLimitWakesAWaiter() throws {
        let pool = Pool(limit: 1)
        _ = try lease(pool, creating: 1)
        let waiter = checkOutOnAnotherThread(pool)
        waitForWaiters(pool, 1)
        pool.limit = 2
        XCTAssertEqual(waiter.done.wait(timeout: .now() + 5), .success)
        guard case .create = try waiter.outcome.withLock({ $0 })?.get() else {
            return XCTFail("a raised limit lets the waiter create an element")
        }
    }

    func testACancellationEndsAWait() throws {
        let pool = Pool(limit: 1)
        _ = try lease(pool, creating: 1)
        let cancelled = Protected(false)
        let waiter = checkOutOnAnotherThread(pool, isCancelled: { cancelled.withLock { $0 } })
        waitForWaiters(pool, 1)
        cancelled.withLock { $0 = true }
        pool.wakeWaiters()
        XCTAssertEqual(waiter.done.wait(timeout: .now() + 5), .success, "the cancelled waiter stopped waiting")
        XCTAssertThrowsError(try waiter.outcome.withLock({ $0 })?.get()) { error in
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
        let now = pool.statistics
        XCTAssertEqual(now.waiters, 0)
        XCTAssertEqual(now.checkouts, 1, "a cancelled checkout is not counted as one")
        XCTAssertEqual(now.waits, 1, "its wait is")
    }

    func testACheckoutCancelledBeforeItStartsTakesNothing() throws {
        let pool = Pool()
        pool.add(1)
        XCTAssertThrowsError(try pool.checkOut(isCancelled: { true }, take: Self.takeLast, onDeadlock: Self.noDeadlock))
        XCTAssertEqual(pool.statistics.idle, 1, "the idle element stayed")
        XCTAssertEqual(pool.statistics.creating, 0, "no permit was granted")
    }

    func testAPauseWaitsForCheckInsAndBlocksCheckoutsUntilResumed() throws {
        let pool = Pool()
        pool.add(1)
        let held = try lease(pool, creating: 0)
        // The pause waits for the element out.
        let paused = DispatchSemaphore(value: 0)
        let handedOver = Protected<[Int]?>(nil)
        Thread.detachNewThread {
            let idle = pool.pause()
            handedOver.withLock { $0 = idle }
            paused.signal()
        }
        XCTAssertEqual(paused.wait(timeout: .now() + 0.2), .timedOut, "a pause waits while an element is out")
        pool.checkIn(held, .reuse(held.element))
        XCTAssertEqual(paused.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(handedOver.withLock { $0 }, [1], "the idle elements leave the pool with the pause")
        XCTAssertTrue(pool.statistics.isPaused)
        // While paused, a checkout waits, even with no limit and an idle element.
        pool.add(5)
        let waiter = checkOutOnAnotherThread(pool)
        waitForWaiters(pool, 1)
        XCTAssertEqual(waiter.done.wait(timeout: .now() + 0.2), .timedOut, "no checkout while paused")
        XCTAssertEqual(pool.resume(newGeneration: true, idle: [2]), [5], "resume hands back what it replaces")
        XCTAssertEqual(waiter.done.wait(timeout: .now() + 5), .success)
        guard case .idle(let lease) = try waiter.outcome.withLock({ $0 })?.get() else {
            return XCTFail("after the pause the waiter takes the element resume gave")
        }
        XCTAssertEqual(lease.element, 2)
        XCTAssertEqual(lease.generation, 1)
        XCTAssertFalse(pool.statistics.isPaused)
    }

    func testAPauseWithoutWaitingRefusesWhileAnElementIsOut() throws {
        let pool = Pool()
        let out = try lease(pool, creating: 1)
        XCTAssertNil(pool.pauseIfDrained(), "an element is out")
        XCTAssertFalse(pool.statistics.isPaused)
        let drained = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            pool.waitUntilDrained()
            drained.signal()
        }
        XCTAssertEqual(drained.wait(timeout: .now() + 0.2), .timedOut, "it waits while the element is out")
        pool.checkIn(out, .reuse(out.element))
        XCTAssertEqual(drained.wait(timeout: .now() + 5), .success, "the check-in ends the wait")
        XCTAssertEqual(pool.pauseIfDrained(), [1])
        XCTAssertTrue(pool.statistics.isPaused)
        XCTAssertNil(pool.pauseIfDrained(), "already paused")
        pool.resume(idle: [1])
        XCTAssertEqual(pool.statistics.generation, 0, "a resume without a new generation keeps it")
    }

    func testAnOldGenerationsElementIsDroppedAtCheckIn() throws {
        let pool = Pool()
        pool.add(1)
        pool.add(2)
        let out = try lease(pool, creating: 0)
        guard case .create(let permit) = try pool.checkOut(take: { _ in nil }, onDeadlock: Self.noDeadlock) else {
            return XCTFail("a take that chooses none gets a permit")
        }
        XCTAssertEqual(pool.newGeneration(idle: [3]), [1], "the idle elements are handed back to be closed")
        let created = pool.lease(4, with: permit)  // Created with the settings before the new generation.
        XCTAssertFalse(pool.checkIn(out, .reuse(out.element)), "checked out before the new generation")
        XCTAssertFalse(pool.checkIn(created, .reuse(created.element)), "created under the old generation")
        let now = pool.statistics
        XCTAssertEqual(now.idle, 1)
        XCTAssertEqual(now.generation, 1)
        XCTAssertEqual(now.discards, 3, "one idle at the new generation, two at check-in")
        let current = try lease(pool, creating: 0)
        XCTAssertEqual(current.element, 3)
        XCTAssertTrue(pool.checkIn(current, .reuse(current.element)), "the current generation's element stays")
        XCTAssertEqual(pool.statistics.idle, 1)
    }

    /// Elements checked out before a new generation count toward the limit until they come back: a new
    /// generation's idle elements past the limit are handed back to be closed, not kept.
    func testANewGenerationKeepsNoIdleElementPastTheLimit() throws {
        let pool = Pool(limit: 2)
        let first = try lease(pool, creating: 1)
        XCTAssertEqual(pool.newGeneration(idle: [2, 3]), [3], "one place is taken by the lease from before")
        let second = try lease(pool, creating: 9)
        XCTAssertEqual(second.element, 2)
        XCTAssertEqual(pool.newGeneration(idle: [4]), [4], "both places are taken")
        XCTAssertEqual(pool.statistics.idle, 0)
        XCTAssertFalse(pool.checkIn(first, .reuse(first.element)))
        XCTAssertFalse(pool.checkIn(second, .reuse(second.element)))
        XCTAssertEqual(pool.newGeneration(idle: [5, 6, 7]), [7], "nothing out: the limit alone")
        XCTAssertEqual(Pool().newGeneration(idle: [1, 2, 3]), [], "no limit: all kept")
    }

    func testAnExchangeKeepsThePlaceForAReplacement() throws {
        let pool = Pool(limit: 1)
        let out = try lease(pool, creating: 1)
        let permit = pool.exchange(out)
        var now = pool.statistics
        XCTAssertEqual(now.checkedOut, 0)
        XCTAssertEqual(now.creating, 1, "the place is kept for the replacement")
        XCTAssertEqual(now.discards, 1)
        let replacement = pool.lease(2, with: permit)
        pool.checkIn(replacement, .discard)
        now = pool.statistics
        XCTAssertEqual(now.idle, 0)
        XCTAssertEqual(now.creating, 0)
        XCTAssertEqual(now.discards, 2)
        XCTAssertEqual(now.creations, 2, "the first element and its replacement")
    }

    func testTheHolderOfALeaseIsKnown() throws {
        let pool = Pool()
        XCTAssertFalse(pool.isHeldByCurrentThread)
        let out = try lease(pool, creating: 1)
        XCTAssertTrue(pool.isHeldByCurrentThread)
        let elsewhere = Protected<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            elsewhere.withLock { $0 = pool.isHeldByCurrentThread }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(elsewhere.withLock { $0 }, false)
        pool.checkIn(out, .reuse(out.element))
        XCTAssertFalse(pool.isHeldByCurrentThread)
    }
}
