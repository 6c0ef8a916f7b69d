import ArgumentParser
import FMDB
import Foundation

/// What checking whether a key opens every page of a database found; "could not check" is its own answer.
enum KeyCheck: Equatable {
    case opens
    /// The key is refused, or pages fail their check (SQLITE_NOTADB, SQLITE_CORRUPT, integrity problems).
    case doesNotOpen
    /// A lock, an I/O error, anything else: which key opens the file is not known.
    case couldNotCheck(String)

    init(_ error: any Error, _ database: String) {
        let said = error as? CLIError ?? CLIError.fromOpened(error, context: database, keyed: true)
        self = said.code == Exit.wrongKey ? .doesNotOpen : .couldNotCheck(said.message)
    }
}
