import CSQLCipher
import Foundation

/// The kinds of transaction (`BEGIN DEFERRED / IMMEDIATE / EXCLUSIVE`).
///
/// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
public enum FMDBTransactionKind: Sendable {
    case deferred, immediate, exclusive

    var beginSQL: String {
        switch self {
        case .deferred: return "begin deferred transaction"
        case .immediate: return "begin immediate transaction"
        case .exclusive: return "begin exclusive transaction"
        }
    }
}

extension FMDatabase {
    func begin(_ kind: FMDBTransactionKind) throws {
        try runThrowing(kind.beginSQL)
    }

    /// FMDB's transaction block shape: begin, run, commit unless `rollback` was set.
    /// The block is not called when BEGIN fails.
    func runTransaction(kind: FMDBTransactionKind, _ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) throws {
        try begin(kind)
        var shouldRollback: ObjCBool = false
        block(self, &shouldRollback)
        if shouldRollback.boolValue {
            rollback()
        } else if !commit() {
            let error = lastError()
            rollback()
            throw error
        }
    }

    /// Runs `block` in a transaction: commits when it returns, rolls back when it throws.
    ///
    /// ```swift
    /// try db.inTransaction(.immediate) { db in
    ///     try db.executeUpdate("INSERT INTO t VALUES (?)", values: [1])
    /// }
    /// ```
    @discardableResult
    public func inTransaction<T>(_ kind: FMDBTransactionKind = .exclusive, _ block: (FMDatabase) throws -> T) throws -> T {
        try begin(kind)
        let result: T
        do {
            result = try block(self)
        } catch {
            if isInTransaction { rollback() }
            throw error
        }
        guard commit() else {
            let error = lastError()
            if isInTransaction { rollback() }
            throw error
        }
        return result
    }

    /// The queue's and pool's rekey: rekey this connection, verify the new key on a fresh connection,
    /// then checkpoint the WAL (TRUNCATE). Throws, leaving the old key in force, when any step fails
    /// before the rekey took; after it took, a failed verification is reported but cannot be undone.
    func rekeySafely(using provider: any KeyProvider, path: String?, flags: Int32, vfs: String?) throws {
        let savedTimeout = maxBusyRetryTimeInterval
        if savedTimeout < 5 { maxBusyRetryTimeInterval = 5 }
        defer { maxBusyRetryTimeInterval = savedTimeout }
        try rekey(using: provider)
        if let path, isFileBacked {
            let fresh = FMDatabase(path: path)
            fresh.logger = logger
            guard fresh.open(withFlags: flags & ~SQLITE_OPEN_CREATE, vfs: vfs) else { throw fresh.lastError() }
            defer { fresh.close() }
            try fresh.setKey(using: provider)
        }
        if (try? connection?.pragmaText("PRAGMA journal_mode")) == "wal" {
            try checkpoint(.truncate, name: nil, logFrameCount: nil, checkpointCount: nil)
        }
    }
}
