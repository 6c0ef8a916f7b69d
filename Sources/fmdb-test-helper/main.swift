// Scenarios the tests run in a child process: programming errors that must stop the process with a
// clear message (instead of deadlocking), and, later, work to be killed at random moments.
// Not part of the public product: built with the tests, run by FMDBCipherTests.
import FMDB
import Foundation

let arguments = CommandLine.arguments.dropFirst()
guard let scenario = arguments.first else {
    FileHandle.standardError.write(Data("usage: fmdb-test-helper SCENARIO [ARGS]\n".utf8))
    exit(64)
}

switch scenario {
case "queue-reentrant":
    let queue = FMDatabaseQueue()
    queue.inDatabase { _ in
        queue.inDatabase { _ in }
    }
    print("not reached")
case "pool-nested-at-limit":
    let pool = FMDatabasePool()
    pool.maximumNumberOfDatabasesToCreate = 1
    pool.inDatabase { _ in
        pool.inDatabase { _ in }
    }
    print("not reached")
case "pool-rekey-inside-block":
    let pool = FMDatabasePool()
    pool.inDatabase { _ in
        try? pool.rekey(using: PassphraseKeyProvider("x"))
    }
    print("not reached")
case "crash-on-errors":
    let db = FMDatabase()
    db.logsErrors = false
    db.crashOnErrors = true
    _ = db.open()
    db.executeUpdate("this is not sql")
    print("not reached")
default:
    FileHandle.standardError.write(Data("unknown scenario \(scenario)\n".utf8))
    exit(64)
}
