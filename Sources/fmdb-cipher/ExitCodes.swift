import ArgumentParser
import FMDB
import Foundation

/// The tool's documented exit codes (also in `fmdb-cipher --help`, README.md in short, and the DocC article
/// "The fmdb-cipher tool").
enum Exit {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let integrity: Int32 = 2
    static let checkpointPending: Int32 = 3  // rekey: the key changed, but the WAL checkpoint is pending
    static let rekeyUnchecked: Int32 = 4  // rekey: which key opens the file afterwards could not be checked
    // keys init --recovery: the database and its first slot made, no recovery slot; export --keep-old-key: the
    // slotted copy made, no slot for the old key.
    static let partlyDone: Int32 = 5
    static let usage: Int32 = 64  // EX_USAGE, as swift-argument-parser's own
    static let wrongKey: Int32 = 65  // EX_DATAERR: wrong key, or not a database
    static let noInput: Int32 = 66  // EX_NOINPUT: missing or unreadable input file
    static let unsupportedFormat: Int32 = 69  // EX_UNAVAILABLE: a SQLCipher 4 file, the key right, SQLCipher 3 linked
    static let cannotCreate: Int32 = 73  // EX_CANTCREAT: output exists or cannot be created
    static let ioError: Int32 = 74  // EX_IOERR: I/O error, disk full, read-only
    static let busy: Int32 = 75  // EX_TEMPFAIL: busy or locked, try again

    /// The one table of exit codes and what each means, in the words `fmdb-cipher --help` prints: the man
    /// page's EXIT STATUS is made from it (Scripts/install, from the help), and each row of the DocC article's
    /// table starts with these words (ExitStatusTableToolTests compares the three).
    static let table: [(code: Int32, meaning: String)] = [
        (
            success,
            "success (a warning on standard error says when a change may not survive a power loss yet, or names a "
                + "private directory a copy could not remove)"
        ),
        (failure, "other error, including an SQL error in sql"),
        (
            integrity,
            "a damaged key slot file (its structure or tag is bad); integrity check failed, or damage found after "
                + "the key was verified"
        ),
        (
            checkpointPending,
            "rekey (and rekey --data-key): the key was changed (only the new key opens the file), but the WAL "
                + "checkpoint is pending"
        ),
        (rekeyUnchecked, "rekey: which key opens the file afterwards could not be checked"),
        (
            partlyDone,
            "keys init --recovery, export --keep-old-key: the new database was created and opens, but its recovery "
                + "or old-key slot could not be added"
        ),
        (usage, "usage error"),
        (wrongKey, "wrong key, or not a database"),
        (noInput, "input file missing, unreadable, a directory, or not a regular file"),
        (
            unsupportedFormat,
            "a SQLCipher 4 database (the key is right), or a setting only SQLCipher 4 has, and the linked SQLCipher is "
                + "3.x: Scripts/install --sqlcipher 4"
        ),
        (cannotCreate, "output exists (use --force) or cannot be created"),
        (ioError, "I/O error, disk full, read-only; standard output could not be written"),
        (busy, "database busy or locked: another process holds a lock; try again"),
    ]

    /// The table as the root command's help says it: "Exit codes:", then one line per code.
    static var helpText: String {
        "Exit codes:\n"
            + table.map { "  \(String($0.code).padding(toLength: 4, withPad: " ", startingAt: 0))\($0.meaning)" }
            .joined(separator: "\n")
    }
}
