import FMDB
import Foundation
import XCTest

/// Holds an exclusive lock on the file of `holder` (an open, keyed connection of this process): runs
/// `statements` (which begin the transaction, e.g. `BEGIN EXCLUSIVE; INSERT ...`) and keeps it open until
/// the returned closure is called or `seconds` have passed (never by itself when nil), whichever comes
/// first; then rolls it back and closes `holder`. The closure may be called more than once.
public func holdExclusiveLock(
    _ holder: FMDatabase, running statements: String, for seconds: Double?,
    file: StaticString = #filePath, line: UInt = #line
) -> @Sendable () -> Void {
    XCTAssertTrue(holder.executeStatements(statements), "the lock is taken", file: file, line: line)
    // Used by one thread at a time: the `released` flag lets only the first call touch it.
    nonisolated(unsafe) let connection = holder
    let released = Locked(false)
    let release: @Sendable () -> Void = {
        let first = released.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        if first {
            connection.rollback()
            connection.close()
        }
    }
    if let seconds { DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: release) }
    return release
}
