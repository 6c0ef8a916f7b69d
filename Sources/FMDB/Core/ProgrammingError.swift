import Foundation

/// Stops the process for a programming error (never for bad input): re-entrant queue calls and pool
/// calls that could only deadlock. The message goes to standard error first, because `-O` builds drop
/// the message of `preconditionFailure`.
func programmingError(_ message: String, file: StaticString = #file, line: UInt = #line) -> Never {
    FileHandle.standardError.write(Data("FMDB programming error: \(message)\n".utf8))
    preconditionFailure(message, file: file, line: line)
}
