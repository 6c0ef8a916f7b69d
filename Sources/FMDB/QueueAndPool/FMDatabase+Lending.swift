import Foundation
import Synchronization

/// The values of `FMDatabase.lending` that are not a thread.
enum Lending {
    /// No queue or pool owns the connection: no check.
    static let notLent: UInt = 0
    /// A queue or pool owns it and no block runs: every use is refused.
    static let betweenBlocks: UInt = 1
}

// A queue or pool lends its connection to one block at a time. Swift cannot stop the block from
// returning it (`let leaked = queue.inDatabase { $0 }`); these marks let `FMDatabase.recording` refuse
// such a connection, with SQLITE_MISUSE, anywhere but in the thread of the block it is lent to.
extension FMDatabase {
    /// The calling thread runs a block with this connection (or the owner's own work on it).
    func lend() {
        lending.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// The block has returned: uses are refused until the next `lend()`.
    func takeBack() {
        lending.store(Lending.betweenBlocks, ordering: .relaxed)
    }

    /// Runs the owner's own work on the connection (a key check between blocks) from the calling thread,
    /// then puts the lending state back as it was.
    func asOwner<T>(_ body: () throws -> T) rethrows -> T {
        let previous = lending.load(ordering: .relaxed)
        lend()
        defer { lending.store(previous, ordering: .relaxed) }
        return try body()
    }

    /// The owner closes the connection for good (released, stale, refused by a delegate): it is no
    /// longer lent, so `close()` runs.
    func closeAsOwner() {
        lending.store(Lending.notLent, ordering: .relaxed)
        close()
    }
}
