import Foundation
import Logging

extension FMDatabase {
    /// A connection the library opens for its own work (a rotation's rekey, a copy, a key probe, a new
    /// slotted database): it reports every error to the library code that opened it, which throws or
    /// returns it to its caller, so the connection itself logs nothing (`logsErrors` off, its logger at
    /// `critical`). Every such connection is made here: none prints a line the caller did not ask for
    /// (`fmdb-cipher` shows only its own messages).
    static func internalConnection(path: String) -> FMDatabase {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        db.logger.logLevel = .critical
        return db
    }
}
