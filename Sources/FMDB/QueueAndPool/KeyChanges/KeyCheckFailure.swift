/// Why a keyed queue or pool connection is replaced: what checking found, never what one result code
/// suggested (SQLCipher 4.7 and later report the first failed page read as code 26 and every later
/// read of that connection as code 7, "out of memory", for the connection's whole life).
enum KeyCheckFailure: Sendable, Equatable {
    /// The file is under a key this connection does not hold: a fresh connection keyed as this one was
    /// cannot read it either. It was rekeyed, or its data key rotated, elsewhere.
    case anotherKey
    /// This connection cannot read the file (result code `code`) although its key was not shown to be
    /// wrong: a fresh connection with its key reads the file, or could not tell (a lock, an I/O error).
    case unreadable(code: Int32)
    /// The file this connection opened is no longer the one at its path (`SQLITE_FCNTL_HAS_MOVED`: renamed
    /// over by a restore, an export or a migration in place, renamed away, or removed): what it would read
    /// and write is not the database at the path any more. Every connection opened before is replaced.
    case replaced
}
