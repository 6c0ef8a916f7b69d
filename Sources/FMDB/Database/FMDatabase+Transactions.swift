import Foundation

extension FMDatabase {
    func begin(_ kind: FMDBTransactionKind) throws {
        defer { beginProbesKey = false }
        try runThrowing(kind.beginSQL)
    }

    /// Runs `body`, a queue's or pool's transaction on this connection, with its BEGIN serving as the
    /// connection's key check when `beginChecksKey` (immediate and exclusive transactions: see `record`).
    func withBeginAsKeyCheck<T>(_ beginChecksKey: Bool, _ body: () throws -> T) rethrows -> T {
        beginProbesKey = beginChecksKey
        defer { beginProbesKey = false }
        return try body()
    }

    /// How many BEGINs a queue or pool transaction makes when each meets the file under a key changed
    /// elsewhere (before its block runs): one for an idle connection still under an old key, and one for
    /// each key change that lands while BEGIN waits for the write lock.
    static let transactionAttemptsAcrossKeyChanges = 4

    /// FMDB's transaction block shape: begin, run, commit unless `rollback` was set.
    /// The block is not called when BEGIN fails.
    func runTransaction(kind: FMDBTransactionKind, _ block: (FMDatabase, UnsafeMutablePointer<ObjCBool>) -> Void) throws
    {
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
    public func inTransaction<T>(_ kind: FMDBTransactionKind = .exclusive, _ block: (FMDatabase) throws -> T) throws
        -> T
    {
        try begin(kind)
        let result: T
        do {
            result = try block(self)
        } catch {
            if isInTransaction { rollback() }
            throw error
        }
        do {
            try runThrowing("commit transaction")  // Thrown, not logged: the caller gets it.
        } catch {
            if isInTransaction { rollback() }
            throw error
        }
        return result
    }
}

extension FMDatabase {
    /// Whether a transaction is open (`sqlite3_get_autocommit` is 0).
    public var isInTransaction: Bool {
        guard let connection else { return false }
        return !connection.isAutocommit
    }

    private func run(_ sql: String) -> Bool {
        recordingBool { try update(sql) { _ in } }
    }

    /// Begins an exclusive transaction, as FMDB's `beginTransaction`.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
    @discardableResult
    public func beginTransaction() -> Bool { run(FMDBTransactionKind.exclusive.beginSQL) }

    /// Begins a deferred transaction (locks taken on first use).
    @discardableResult
    public func beginDeferredTransaction() -> Bool { run(FMDBTransactionKind.deferred.beginSQL) }

    /// Begins an immediate transaction (the write lock taken now).
    @discardableResult
    public func beginImmediateTransaction() -> Bool { run(FMDBTransactionKind.immediate.beginSQL) }

    /// Begins an exclusive transaction.
    @discardableResult
    public func beginExclusiveTransaction() -> Bool { run(FMDBTransactionKind.exclusive.beginSQL) }

    /// Commits the open transaction.
    @discardableResult
    public func commit() -> Bool { run("commit transaction") }

    /// Rolls back the open transaction.
    @discardableResult
    public func rollback() -> Bool { run("rollback transaction") }

    // MARK: - Savepoints

    /// A savepoint name quoted as an SQL string literal.
    private static func quotedSavePointName(_ name: String) -> String {
        "'" + name.replacingOccurrences(of: "'", with: "''") + "'"
    }

    func runThrowing(_ sql: String) throws {
        try recording { try update(sql) { _ in } }
    }

    /// Starts a savepoint (`SAVEPOINT 'name'`).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_savepoint.html>
    public func startSavePoint(withName name: String) throws {
        try runThrowing("savepoint \(Self.quotedSavePointName(name));")
    }

    /// Releases a savepoint (`RELEASE SAVEPOINT 'name'`).
    public func releaseSavePoint(withName name: String) throws {
        try runThrowing("release savepoint \(Self.quotedSavePointName(name));")
    }

    /// Rolls back to a savepoint, which stays open (`ROLLBACK TO SAVEPOINT 'name'`).
    public func rollback(toSavePointWithName name: String) throws {
        try runThrowing("rollback transaction to savepoint \(Self.quotedSavePointName(name));")
    }

    /// Runs `block` inside a savepoint; setting `rollback.pointee = true` rolls it back.
    /// Savepoint names are unique per connection (no process-wide counter).
    ///
    /// ```swift
    /// let error = db.inSavePoint { rollback in
    ///     if !db.executeUpdate("INSERT INTO t VALUES (1)") { rollback.pointee = true }
    /// }
    /// ```
    /// - Returns: nil, or the error that starting, rolling back or releasing the savepoint met.
    @discardableResult
    public func inSavePoint(_ block: (UnsafeMutablePointer<ObjCBool>) -> Void) -> Error? {
        savePointCounter += 1
        let name = "dbSavePoint\(savePointCounter)"
        do {
            try startSavePoint(withName: name)
        } catch {
            return error
        }
        var shouldRollback: ObjCBool = false
        block(&shouldRollback)
        do {
            if shouldRollback.boolValue {
                // Roll back to the savepoint, then release it so it does not stay on the stack.
                try rollback(toSavePointWithName: name)
            }
            try releaseSavePoint(withName: name)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - WAL checkpoints

    /// Checkpoints the WAL of every attached database.
    public func checkpoint(_ mode: FMDBCheckpointMode) throws {
        try checkpoint(mode, name: nil, logFrameCount: nil, checkpointCount: nil)
    }

    /// Checkpoints the WAL of `name` (nil: every attached database).
    public func checkpoint(_ mode: FMDBCheckpointMode, name: String?) throws {
        try checkpoint(mode, name: name, logFrameCount: nil, checkpointCount: nil)
    }

    /// Checkpoints the WAL of `name` (nil: every attached database).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/wal_checkpoint_v2.html>
    public func checkpoint(
        _ mode: FMDBCheckpointMode,
        name: String?,
        logFrameCount: UnsafeMutablePointer<Int32>?,
        checkpointCount: UnsafeMutablePointer<Int32>?
    ) throws {
        try recording {
            let connection = try requireConnection()
            try connection.checkpoint(
                mode: mode.rawValue, name: name, logFrameCount: logFrameCount, checkpointCount: checkpointCount)
        }
    }
}
