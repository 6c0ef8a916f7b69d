import CSQLCipher
import Foundation

/// The connection-level operations the FMDB façade asks for, so that no file outside `Core/` (and the
/// custom-function bridge) touches a `sqlite3*` pointer.
///
/// Keys reach SQLCipher here and nowhere else: `key(_:schema:)` is the one call of `sqlite3_key_v2`,
/// `rekey(_:schema:)` the one call of `sqlite3_rekey_v2`, and `attachEncrypted(path:schema:key:defaults:)`
/// the one ATTACH that carries a key (as a bound parameter that SQLite reads in place, never SQL text), so
/// "keys never travel as SQL text" is checked by reading this file.
extension Connection {
    // MARK: - Keys

    /// Hands `key` to SQLCipher for `schema` (`sqlite3_key_v2`).
    ///
    /// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#sqlite3_key>
    /// `registeringCryptoProvider: false` only for the provider registration's own scratch connection.
    func key(_ key: SecureBytes, schema: String = "main", registeringCryptoProvider: Bool = true) throws {
        if registeringCryptoProvider { CryptoProviderRegistration.ensureRegistered() }
        guard let db = handle else { throw FMDatabaseError.closed() }
        let rc = key.withUnsafeBytes { bytes in
            sqlite3_key_v2(db, schema, bytes.baseAddress, Int32(clamping: bytes.count))
        }
        try check(rc)
    }

    /// A scratch in-memory connection, for facts of the linked library (`SQLCipherRuntime`); it never holds
    /// data. Nil when SQLite cannot open one.
    static func openScratch() -> Connection? {
        try? Connection.open(path: ":memory:", flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs: nil)
    }

    /// A scratch in-memory connection keyed with a fixed raw key, `x'00…'` (32 zero bytes: no KDF): SQLCipher
    /// answers some facts only on a keyed connection, and the provider registration holds one for its
    /// activation. Not a secret: the database never holds data. Nil when it cannot be opened or keyed.
    /// `registeringCryptoProvider: false` only for the registration itself (see
    /// `key(_:schema:registeringCryptoProvider:)`).
    static func openScratchKeyed(registeringCryptoProvider: Bool = true) -> Connection? {
        guard let connection = openScratch() else { return nil }
        let scratchKey = SecureBytes(utf8: "x'" + String(repeating: "00", count: 32) + "'")
        guard (try? connection.key(scratchKey, registeringCryptoProvider: registeringCryptoProvider)) != nil else {
            try? connection.close()
            return nil
        }
        return connection
    }

    /// Attaches the existing encrypted file at `path` as `schema`, keyed with `key`, in SQLCipher's
    /// default cipher settings (the only ones a codec has while SQLite reads an attached file's schema).
    ///
    /// SQLite reads an attached file's schema inside ATTACH, so an existing encrypted file needs its key at
    /// that moment: `sqlite3_key_v2` can only key a schema that is already attached, and `ATTACH ... KEY ''`
    /// followed by it fails with SQLITE_NOTADB. So the key is ATTACH's KEY argument, bound as a static BLOB
    /// that SQLite reads in place from the caller's wiped-on-release buffer (no copy); the statement is
    /// never cached, and its bindings are cleared before it is finalized. Settings other than the defaults
    /// would have to be SQLCipher's process-wide `cipher_default_*`, which every other codec created in
    /// the process at that moment would copy: the library never changes them.
    ///
    /// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#attach>
    func attachEncrypted(path: String, schema: String, key: SecureBytes) throws {
        CryptoProviderRegistration.ensureRegistered()
        try runningLibraryStatements {
            let sql = "ATTACH DATABASE ?1 AS \(schema) KEY ?2"
            let statement = try prepare(sql)
            defer {
                statement.clearBindings()
                statement.finalize()
            }
            try check(statement.bind(path, at: 1), sql: sql)
            let stepped = try key.withUnsafeBytes { bytes -> Int32 in
                try check(statement.bindStatic(bytes: bytes, at: 2), sql: sql)
                // Stepped while `bytes` is certainly alive: SQLite reads the key during this call.
                return statement.step()
            }
            guard stepped == SQLITE_DONE else { throw error(code: stepped, sql: sql) }
        }
    }

    /// Re-encrypts `schema` under `key` (`sqlite3_rekey_v2`) and returns SQLite's result code. The caller
    /// judges the outcome: SQLCipher 3.4.1 returns `SQLITE_OK` even when the rekey did not take.
    ///
    /// Related SQLCipher documentation: <https://www.zetetic.net/sqlcipher/sqlcipher-api/#sqlite3_rekey>
    func rekey(_ key: SecureBytes, schema: String = "main") -> Int32 {
        CryptoProviderRegistration.ensureRegistered()
        guard let db = handle else { return SQLITE_MISUSE }
        return key.withUnsafeBytes { bytes in
            sqlite3_rekey_v2(db, schema, bytes.baseAddress, Int32(clamping: bytes.count))
        }
    }

    /// Applies cipher settings right after keying (`PRAGMA cipher_page_size`, `PRAGMA kdf_iter`).
    func applyCipher(formatStatements: [String] = [], pageSize: Int?, kdfIterations: Int?, schema: String? = nil) throws
    {
        let prefix = schema.map { "\($0)." } ?? ""
        // The library's own statements: the keyed authorizer refuses these pragmas from SQL text.
        try runningLibraryStatements {
            for statement in formatStatements { try execute(statement) }
            if let pageSize { try execute("PRAGMA \(prefix)cipher_page_size = \(pageSize)") }
            if let kdfIterations { try execute("PRAGMA \(prefix)kdf_iter = \(kdfIterations)") }
        }
    }

    /// What a fresh connection keyed with `key` finds in the file at `path`.
    enum KeyProbe {
        /// The key reads the schema.
        case opens
        /// The key positively does not read the file: SQLITE_NOTADB from reading the schema of a file
        /// that could be opened, locked and read.
        case doesNotOpen(FMDatabaseError)
        /// The file stayed locked by another connection for the whole busy timeout.
        case locked
        /// The key could not be checked: any other error (I/O, a hot journal a read-only connection
        /// cannot roll back, a file that cannot be opened...). Says nothing about the key.
        case couldNotCheck(FMDatabaseError)

        /// The probe as one of three answers, for callers that only need to know whether the key was
        /// checked: `true` opens, `false` positively does not, nil (with the reason) could not check.
        var verdict: (opens: Bool?, error: FMDatabaseError?) {
            switch self {
            case .opens: return (true, nil)
            case .doesNotOpen(let error): return (false, error)
            case .locked:
                return (
                    nil,
                    FMDatabaseError(code: SQLITE_BUSY, message: "The database stayed locked by another connection.")
                )
            case .couldNotCheck(let error): return (nil, error)
            }
        }
    }

    /// Opens a separate connection to `path` (never creating it), keys it with `key` and the cipher
    /// settings (nil: SQLCipher's defaults), and
    /// reads the schema: which key opens a file, asked of the file itself. Read-write unless `flags` say
    /// read-only, so a hot journal left by a failed commit is rolled back first, as any opener would.
    static func probeKey(
        _ key: SecureBytes,
        path: String,
        flags: Int32,
        vfs: String?,
        formatStatements: [String],
        pageSize: Int?,
        kdfIterations: Int?,
        busyTimeout: TimeInterval
    ) -> KeyProbe {
        do {
            let probe = try Connection.open(path: path, flags: multiThreadFlags(flags & ~SQLITE_OPEN_CREATE), vfs: vfs)
            defer { try? probe.close() }
            probe.setBusyTimeout(busyTimeout)
            try probe.key(key)
            try probe.execute("PRAGMA temp_store = MEMORY")
            try probe.applyCipher(formatStatements: formatStatements, pageSize: pageSize, kdfIterations: kdfIterations)
            try probe.readSchemaVerifyingKey(
                plaintextHeader: formatStatements.contains {
                    $0.contains("cipher_plaintext_header_size") && !$0.filter { $0 != " " }.hasSuffix("=0")
                })
            return .opens
        } catch let error as FMDatabaseError {
            return classify(error)
        } catch {
            return .couldNotCheck(FMDatabaseError(code: SQLITE_ERROR, message: "\(error)"))
        }
    }

    /// Reads the schema of a connection keyed just before: the read that tells whether the key opens the file.
    /// With a plaintext header, SQLite reads the header in the clear and SQLCipher 4 reports a page 1 that does
    /// not authenticate as `SQLITE_ERROR` ("SQL logic error", where a file without one gets `SQLITE_NOTADB`):
    /// that is a key (or header size, or salt) that does not open the file, thrown as `SQLITE_NOTADB`.
    func readSchemaVerifyingKey(plaintextHeader: Bool) throws {
        do {
            _ = try pragmaText("SELECT count(*) FROM sqlite_master")
        } catch let error as FMDatabaseError where plaintextHeader && error.hasCode(.error) {
            throw FMDatabaseError(
                code: SQLITE_NOTADB,
                message: "file is not a database (wrong key, or the plaintext header size or salt given is not the "
                    + "file's)")
        }
    }

    /// What an error met while keying and reading a file says about the key: only SQLITE_NOTADB says
    /// "does not open"; a lock says nothing yet; anything else says nothing at all.
    static func classify(_ error: FMDatabaseError) -> KeyProbe {
        switch error.resultCodeValue {
        case .notADatabase: return .doesNotOpen(error)
        case .busy, .locked: return .locked
        default: return .couldNotCheck(error)
        }
    }

    // MARK: - Settings and facts

    /// SQLite's busy timeout; 0 (or less) fails at once with `SQLITE_BUSY`.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/busy_timeout.html>
    func setBusyTimeout(_ seconds: TimeInterval) {
        guard let db = handle else { return }
        sqlite3_busy_timeout(db, seconds.steps(of: 0.001))
    }

    /// Interrupts the statement running on this connection (callable from another thread).
    func interrupt() {
        if let db = handle { sqlite3_interrupt(db) }
    }

    /// A handle another thread may use to interrupt this connection.
    var interruptHandle: InterruptHandle { InterruptHandle(slot: interruptSlot) }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int32 {
        guard let db = handle else { return 0 }
        return sqlite3_changes(db)
    }

    /// The rowid of the last row inserted.
    var lastInsertRowID: Int64 {
        guard let db = handle else { return 0 }
        return sqlite3_last_insert_rowid(db)
    }

    /// Sets a run-time limit and returns the previous value (-1 reads only); -1 when closed.
    func limit(_ type: Int32, value: Int32) -> Int32 {
        guard let db = handle else { return -1 }
        return sqlite3_limit(db, type, value)
    }

    /// Whether `schema` was opened read-only (read-only file, filesystem or open flags).
    func isReadOnly(schema: String = "main") -> Bool {
        guard let db = handle else { return false }
        return sqlite3_db_readonly(db, schema) == 1
    }

    /// SQLite's current message on this connection; nil when closed.
    var currentErrorMessage: String? {
        guard let db = handle else { return nil }
        return String(cString: sqlite3_errmsg(db))
    }

    /// SQLite's current extended result code on this connection (`SQLITE_OK` when closed).
    var currentExtendedErrorCode: Int32 {
        guard let db = handle else { return SQLITE_OK }
        return sqlite3_extended_errcode(db)
    }

    /// The result code an operating-system error on `schema`'s file stands for (full disk, read-only
    /// filesystem, I/O error), from the VFS's last `errno` (`SQLITE_FCNTL_LAST_ERRNO`); nil when the
    /// file's last system call did not fail, or for another errno. Used where SQLite reports a file
    /// error only as text (an SQL function's failure, such as `sqlcipher_export`'s).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/c_fcntl_begin_atomic_write.html>
    func fileErrorCode(schema: String) -> Int32? {
        if isReadOnly(schema: schema) { return SQLITE_READONLY }
        guard let db = handle else { return nil }
        var lastErrno: Int32 = 0
        guard sqlite3_file_control(db, schema, SQLITE_FCNTL_LAST_ERRNO, &lastErrno) == SQLITE_OK else { return nil }
        return FileSystem.resultCode(forSystemError: lastErrno)
    }

    /// Whether the main database file this connection opened is no longer the file at its path (renamed
    /// over, renamed away or unlinked since it was opened): SQLite's `SQLITE_FCNTL_HAS_MOVED`, which the unix
    /// VFS answers by comparing the inode it opened with the one at the path it opened now. SQLite opens the
    /// target of a symbolic link, so `path`, the path the connection was opened with, is compared too: a link
    /// that now leads to another file (or to none) has moved as well. False when it cannot tell (an
    /// in-memory database, a URI, a VFS that does not answer).
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/c_fcntl_begin_atomic_write.html>
    func mainFileHasMoved(openedAs path: String?) -> Bool {
        guard let db = handle else { return false }
        var moved: Int32 = 0
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK else { return false }
        if moved != 0 { return true }
        guard let path, !path.isEmpty, path != ":memory:", !path.lowercased().hasPrefix("file:"),
            let opened = fileName(schema: "main"), opened != path
        else { return false }
        var atPath = stat()
        var atOpened = stat()
        guard stat(opened, &atOpened) == 0 else { return false }
        guard stat(path, &atPath) == 0 else { return true }
        return atPath.st_dev != atOpened.st_dev || atPath.st_ino != atOpened.st_ino
    }

    /// The file behind `schema` (`sqlite3_db_filename`); nil for an in-memory or temporary database.
    func fileName(schema: String) -> String? {
        guard let db = handle, let name = sqlite3_db_filename(db, schema) else { return nil }
        let path = String(cString: name)
        return path.isEmpty ? nil : path
    }

    // MARK: - Online backup

    /// Copies `main` of this connection into `main` of `destination` (SQLite's online backup), retrying
    /// busy steps every 10 ms up to `maxBusyWaits` times.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/backup.html>
    func backup(to destination: Connection, maxBusyWaits: Int) throws {
        guard let to = destination.handle, let from = handle else { throw FMDatabaseError.closed() }
        guard let backup = sqlite3_backup_init(to, "main", from, "main") else {
            throw destination.error()
        }
        var rc: Int32
        var busyWaits = 0
        repeat {
            rc = sqlite3_backup_step(backup, 256)
            if rc == SQLITE_BUSY || rc == SQLITE_LOCKED {
                busyWaits += 1
                if busyWaits > maxBusyWaits { break }
                sqlite3_sleep(10)
            }
        } while rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED
        let finish = sqlite3_backup_finish(backup)
        if rc != SQLITE_DONE { throw destination.error(code: rc) }
        try destination.check(finish)
    }
}

/// A connection handle that may be used from another thread for `sqlite3_interrupt` only.
/// What another thread may use to interrupt a connection: the connection's `InterruptSlot`, which the
/// connection empties (under the slot's lock) before it closes its handle, so an interrupt never reaches a
/// closed, freed handle. A connection reopened meanwhile is a new connection with a slot of its own: an
/// interrupt through the old handle then does nothing.
struct InterruptHandle: Sendable {
    fileprivate let slot: InterruptSlot?

    func interrupt() {
        slot?.interrupt()
    }

    /// From the connection's own thread: until `removeCancellationCheck()`, every statement of the connection
    /// asks `cancellation` every 1,000 virtual-machine steps and stops with `SQLITE_INTERRUPT` once it is
    /// cancelled. `sqlite3_interrupt` alone stops only the statements running when it is called (SQLite
    /// clears it when the next statement starts while none runs), so a statement a block starts after the
    /// cancellation would otherwise run to its end.
    func installCancellationCheck(_ cancellation: BlockCancellation) {
        slot?.setProgressHandler(Unmanaged.passUnretained(cancellation).toOpaque())
    }

    /// Removes what `installCancellationCheck` installed (nothing when the connection closed meanwhile).
    func removeCancellationCheck() {
        slot?.setProgressHandler(nil)
    }
}

/// A connection's handle, for `sqlite3_interrupt` from other threads, until the connection closes.
///
/// Sendable: its one mutable value is `Protected`; `sqlite3_interrupt` is allowed from any thread while the
/// connection is open, and `clear()` (called before `sqlite3_close`) ends that under the same lock.
final class InterruptSlot: Sendable {
    private struct Handle: @unchecked Sendable {
        let pointer: OpaquePointer?
    }

    private let handle: Protected<Handle>

    init(_ handle: OpaquePointer?) {
        self.handle = Protected(Handle(pointer: handle))
    }

    func interrupt() {
        handle.withLock { if let pointer = $0.pointer { sqlite3_interrupt(pointer) } }
    }

    /// Installs (`context` not nil: a `BlockCancellation` the caller keeps alive until it removes it) or
    /// removes the cancellation check, while the handle is open.
    func setProgressHandler(_ context: UnsafeMutableRawPointer?) {
        handle.withLock { handle in
            guard let pointer = handle.pointer else { return }
            if let context {
                sqlite3_progress_handler(pointer, 1_000, cancellationProgressHandler, context)
            } else {
                sqlite3_progress_handler(pointer, 0, nil, nil)
            }
        }
    }

    /// No interrupt reaches the handle after this returns.
    func clear() {
        handle.withLock { $0 = Handle(pointer: nil) }
    }
}

/// SQLite's progress handler for `InterruptHandle.installCancellationCheck`: non-zero stops the statement.
private func cancellationProgressHandler(_ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let context else { return 0 }
    return Unmanaged<BlockCancellation>.fromOpaque(context).takeUnretainedValue().isCancelled ? 1 : 0
}

/// Facts about result codes and the linked library that need no connection.
enum SQLiteLibrary {
    /// SQLite's own English text for a result code.
    static func message(for code: Int32) -> String {
        guard let text = sqlite3_errstr(code) else { return "unknown error (\(code))" }
        return String(cString: text)
    }

    /// Whether the linked SQLite was built thread-safe.
    static var isThreadSafe: Bool { sqlite3_threadsafe() != 0 }

    /// SQLite's version, e.g. "3.15.2".
    static var version: String { String(cString: sqlite3_libversion()) }
}

extension TimeInterval {
    /// These seconds as a whole number of `unit`-second steps, for the C APIs that count in integers
    /// (SQLite's busy timeout in milliseconds, the backup's 10 ms busy waits). Any Double a caller set is
    /// taken without trapping: NaN, zero and negatives are 0 steps (do not wait); infinity and anything
    /// past `Int32.max` steps are `Int32.max` (about 24.8 days of milliseconds).
    func steps(of unit: TimeInterval) -> Int32 {
        let steps = (self / unit).rounded()
        guard steps > 0 else { return 0 }  // also NaN
        return steps < Double(Int32.max) ? Int32(steps) : .max
    }
}
