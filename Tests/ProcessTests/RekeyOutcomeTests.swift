@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// After any rekey the caller can tell exactly one of "done", "not done, the old key still
/// opens the file" and "done, but the WAL checkpoint is pending" — on `FMDatabase`, the queue, the
/// pool and the tool, with a reader or a writer in another process, in WAL and rollback-journal mode.
/// Every verdict is checked against the file itself: which key opens it afterwards.
final class RekeyOutcomeTests: FMDBCipherTestCase {
    var helper: String!
    var tool: String!

    static let oldHex = String(repeating: "1a", count: 32)
    static let newHex = String(repeating: "2b", count: 32)

    override func setUpWithError() throws {
        try super.setUpWithError()
        helper = try builtHelper()
        tool = try builtTool()
    }

    func provider(_ hex: String) throws -> RawKeyProvider {
        var text = hex
        return try text.withUTF8 { try RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) }
    }

    /// A keyed database with 200 rows in table t, in `journalMode`.
    func makeDatabase(_ name: String, journalMode: String) throws -> String {
        let path = directory.path(name)
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: provider(Self.oldHex))
        XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = \(journalMode)"), journalMode)
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<200 { XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (?)", i)) }
        XCTAssertTrue(db.commit())
        db.close()
        return path
    }

    /// Which key opens the file now (read by a fresh connection, with an integrity check).
    enum Opener: Equatable { case old, new, neither }

    func whichKeyOpens(_ path: String, rows: Int = 200) throws -> Opener {
        for (hex, opener) in [(Self.newHex, Opener.new), (Self.oldHex, Opener.old)] {
            let db = FMDatabase(path: path)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            defer { db.close() }
            if (try? db.setKey(using: provider(hex))) != nil {
                XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok")
                XCTAssertEqual(db.long(forQuery: "SELECT count(*) FROM t WHERE a >= 0"), rows, "no row lost")
                return opener
            }
        }
        return .neither
    }

    /// Another process holding a read or write transaction on the database until `release()`.
    final class Holder {
        let process = Process()
        let input = Pipe()
        let output = Pipe()

        init(helper: String, path: String, mode: String, passphrase: Bool = false) throws {
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = ["hold", path, RekeyOutcomeTests.oldHex, mode] + (passphrase ? ["passphrase"] : [])
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            guard waitForOutput(of: process, on: output, containing: "holding", within: 60).found else {
                throw NSError(domain: "Holder", code: Int(process.isRunning ? 0 : process.terminationStatus))
            }
        }

        func release() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }

        deinit {
            if process.isRunning { process.terminate() }
        }
    }

    // MARK: - FMDatabase.rekeySafely

    func testDoneWithoutOtherConnections() throws {
        for mode in ["wal", "delete"] {
            let path = try makeDatabase("done-\(mode).db", journalMode: mode)
            let db = FMDatabase(path: path)
            XCTAssertTrue(db.open())
            try db.setKey(using: provider(Self.oldHex))
            let handle = db.sqliteHandle
            XCTAssertEqual(try db.rekeySafely(using: provider(Self.newHex), busyTimeout: 1), .done, mode)
            XCTAssertEqual(db.sqliteHandle, handle, "\(mode): a rekey that took keeps the connection")
            XCTAssertTrue(
                db.executeUpdate("INSERT INTO t VALUES (-5)"), "\(mode): the connection writes under the new key")
            db.close()
            XCTAssertEqual(try whichKeyOpens(path), .new, mode)
        }
    }

    /// WAL, a reader in another process: the rekey takes (WAL readers do not block a writer), but the
    /// TRUNCATE checkpoint cannot run past the reader. Before the fix this threw SQLITE_BUSY, which
    /// callers read as "nothing happened".
    func testWALWithAReaderIsDoneWithACheckpointPending() throws {
        let path = try makeDatabase("pending.db", journalMode: "wal")
        let holder = try Holder(helper: helper, path: path, mode: "read")
        let db = FMDatabase(path: path)
        let capture = LogCapture()
        db.logger = capture.logger()
        XCTAssertTrue(db.open())
        try db.setKey(using: provider(Self.oldHex))
        let outcome = try db.rekeySafely(using: provider(Self.newHex), busyTimeout: 1)
        guard case .checkpointPending(let error) = outcome else {
            return XCTFail("expected a pending checkpoint, got \(outcome)")
        }
        XCTAssertEqual(error.resultCode, SQLITE_BUSY)
        XCTAssertEqual(capture.all, [], "a returned outcome is the caller's to report, not also logged")
        XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (-6)"), "the connection goes on under the new key")
        db.close()
        holder.release()
        XCTAssertEqual(try whichKeyOpens(path), .new)
    }

    /// A writer in another process holds the write lock for longer than the busy timeout: not done, and
    /// the old key still opens the file, in both journal modes.
    func testAWriterMakesItNotDoneAndTheOldKeyStillOpens() throws {
        for mode in ["wal", "delete"] {
            let path = try makeDatabase("writer-\(mode).db", journalMode: mode)
            let holder = try Holder(helper: helper, path: path, mode: "write")
            let db = FMDatabase(path: path)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            try db.setKey(using: provider(Self.oldHex))
            XCTAssertThrowsError(try db.rekeySafely(using: provider(Self.newHex), busyTimeout: 1), mode) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_BUSY), "\(mode): \(error)")
            }
            holder.release()
            XCTAssertTrue(
                db.executeUpdate("INSERT INTO t VALUES (-7)"), "\(mode): the connection still works with the old key")
            db.close()
            XCTAssertEqual(try whichKeyOpens(path), .old, mode)
        }
    }

    /// Rollback journal, a reader in another process: the rekey cannot commit (SQLCipher 3.4.1 ignores
    /// that failed commit and returns OK): not done, old key.
    func testRollbackJournalWithAReaderIsNotDone() throws {
        let path = try makeDatabase("reader-delete.db", journalMode: "delete")
        let holder = try Holder(helper: helper, path: path, mode: "read")
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        try db.setKey(using: provider(Self.oldHex))
        XCTAssertThrowsError(try db.rekeySafely(using: provider(Self.newHex), busyTimeout: 1)) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_BUSY), "\(error)")
        }
        holder.release()
        db.close()
        XCTAssertEqual(try whichKeyOpens(path), .old)
    }

    /// A full disk during the rekey, with a page cache so small that the rekey spills pages into the file
    /// before its journal fills the disk: SQLCipher 3.4.1 rolls back and still returns OK, and SQLite's
    /// written-pages counter says pages were written. The verdict must be "not done" (SQLITE_FULL), and
    /// the old key must open every row. (A 384 KiB tmpfs, mounted as root; CI runs as root.)
    func testFullDiskDuringARekeyThatSpilledIsNotDone() throws {
        guard getuid() == 0, let mount = which("mount"), let umount = which("umount") else {
            throw XCTSkip("needs root to mount a size-limited tmpfs")
        }
        let point = directory.path("tmpfs")
        try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
        let mounted = try runProcess(mount, ["-t", "tmpfs", "-o", "size=384k", "tmpfs", point])
        guard mounted.status == 0 else { throw XCTSkip("mount refused: \(mounted.stderr)") }
        defer { _ = try? runProcess(umount, [point]) }
        for mode in ["delete", "wal"] {
            let path = point + "/full-\(mode).db"
            let db = FMDatabase(path: path)
            db.logsErrors = false
            XCTAssertTrue(db.open())
            try db.setKey(using: provider(Self.oldHex))
            XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a, b)"))
            // More than half the filesystem, whatever the page size of the linked SQLCipher's format (1024 on
            // 3.x, 4096 on 4.x): the rekey's journal (or WAL) cannot hold a copy of every page.
            XCTAssertTrue(db.beginTransaction())
            var rows = 0
            while db.long(forQuery: "PRAGMA page_count") * db.long(forQuery: "PRAGMA page_size") < 215_000 {
                XCTAssertTrue(db.executeUpdate("INSERT INTO t VALUES (?, randomblob(700))", rows))
                rows += 1
            }
            XCTAssertTrue(db.commit())
            XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = \(mode)"), mode)
            XCTAssertTrue(db.executeStatements("PRAGMA cache_size = 10"), "so the rekey spills pages before it commits")
            XCTAssertThrowsError(try db.rekeySafely(using: provider(Self.newHex), busyTimeout: 1), mode) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_FULL), "\(mode): \(error)")
            }
            db.close()
            XCTAssertEqual(try whichKeyOpens(path, rows: rows), .old, mode)
            try FileManager.default.removeItem(atPath: path)
        }
    }

    // MARK: - Queue and pool

    func testQueueAndPoolSwitchProviderWhenOnlyTheCheckpointIsPending() throws {
        let oldProvider = try provider(Self.oldHex)
        let newProvider = try provider(Self.newHex)
        let queuePath = try makeDatabase("queue.db", journalMode: "wal")
        let poolPath = try makeDatabase("pool.db", journalMode: "wal")
        let queueHolder = try Holder(helper: helper, path: queuePath, mode: "read")
        let poolHolder = try Holder(helper: helper, path: poolPath, mode: "read")

        let queue = try FMDatabaseQueue(path: queuePath, keyProvider: oldProvider)
        guard case .checkpointPending = try queue.rekey(using: newProvider, busyTimeout: 0.5) else {
            return XCTFail("queue: expected a pending checkpoint")
        }
        queue.close()
        let queueCount: Int32? = queue.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(queueCount, 200, "the queue reopens its own file: it switched to the new provider")
        XCTAssertNil(queue.lastError)
        queue.close()

        let pool = try FMDatabasePool(path: poolPath, keyProvider: oldProvider)
        guard case .checkpointPending = try pool.rekey(using: newProvider, busyTimeout: 0.5) else {
            return XCTFail("pool: expected a pending checkpoint")
        }
        pool.releaseAllDatabases()
        let poolCount: Int32? = pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(poolCount, 200, "the pool's new connections use the new provider")
        pool.releaseAllDatabases()

        queueHolder.release()
        poolHolder.release()
        XCTAssertEqual(try whichKeyOpens(queuePath), .new)
        XCTAssertEqual(try whichKeyOpens(poolPath), .new)
    }

    func testQueueAndPoolKeepTheOldProviderWhenNotDone() throws {
        let oldProvider = try provider(Self.oldHex)
        let newProvider = try provider(Self.newHex)
        for mode in ["wal", "delete"] {
            let path = try makeDatabase("keep-\(mode).db", journalMode: mode)
            let holder = try Holder(helper: helper, path: path, mode: "write")
            let queue = try FMDatabaseQueue(path: path, keyProvider: oldProvider)
            // A short busy timeout, which each call must honour: the default (5 s or more) would take
            // longer than 4.8 s, and is tested in QueueAndPoolRekeyTests.
            var started = Date()
            XCTAssertThrowsError(try queue.rekey(using: newProvider, busyTimeout: 0.5)) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_BUSY))
            }
            XCTAssertLessThan(
                Date().timeIntervalSince(started), 4.8, "\(mode): the queue's rekey waits its busyTimeout")
            let pool = try FMDatabasePool(path: path, keyProvider: oldProvider)
            started = Date()
            XCTAssertThrowsError(try pool.rekey(using: newProvider, busyTimeout: 0.5)) {
                XCTAssertEqual(nsError($0).code, Int(SQLITE_BUSY))
            }
            XCTAssertLessThan(Date().timeIntervalSince(started), 4.8, "\(mode): the pool's rekey waits its busyTimeout")
            holder.release()
            queue.close()
            let queueCount: Int32? = queue.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(queueCount, 200, "\(mode): queue, old key")
            queue.close()
            pool.releaseAllDatabases()
            let poolCount: Int32? = pool.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }
            XCTAssertEqual(poolCount, 200, "\(mode): pool, old key")
            pool.releaseAllDatabases()
            XCTAssertEqual(try whichKeyOpens(path), .old, mode)
        }
    }

    // MARK: - The tool

    func rekeyWithTool(_ path: String) throws -> (status: Int32, stderr: String) {
        let result = try runProcess(
            tool,
            [
                "rekey", path, "--kdf", "raw", "--key-env", "OLD", "--new-key-env", "NEW",
                "--busy-timeout", "1", "--quiet",
            ],
            input: "", environment: ["OLD": Self.oldHex, "NEW": Self.newHex])
        return (result.status, result.stderr)
    }

    func testToolExitCodesTellEachOutcome() throws {
        // A reader on a WAL database: the key changed, the checkpoint is pending: exit 3 (was 75).
        let pending = try makeDatabase("tool-pending.db", journalMode: "wal")
        var holder = try Holder(helper: helper, path: pending, mode: "read")
        var result = try rekeyWithTool(pending)
        holder.release()
        XCTAssertEqual(result.status, 3, result.stderr)
        XCTAssertTrue(result.stderr.contains("only the new key opens it"), result.stderr)
        XCTAssertFalse(
            result.stderr.contains(" fmdb: "),
            "only the tool's own message, not the library's log lines: \(result.stderr)")
        XCTAssertEqual(try whichKeyOpens(pending), .new)

        // A writer: not done, exit 75, the old key opens it.
        for mode in ["wal", "delete"] {
            let busy = try makeDatabase("tool-busy-\(mode).db", journalMode: mode)
            holder = try Holder(helper: helper, path: busy, mode: "write")
            result = try rekeyWithTool(busy)
            holder.release()
            XCTAssertEqual(result.status, 75, "\(mode): \(result.stderr)")
            XCTAssertEqual(try whichKeyOpens(busy), .old, mode)
        }

        // Nobody else: done, exit 0.
        let done = try makeDatabase("tool-done.db", journalMode: "delete")
        result = try rekeyWithTool(done)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try whichKeyOpens(done), .new)
    }

    /// `rekey --data-key` with a reader holding the WAL: the data key rotated, the checkpoint is pending
    /// (exit 3), and stderr holds the tool's own message only, no line logged by the library's connections.
    func testToolDataKeyRotationWithAReaderShowsOnlyItsOwnMessage() throws {
        let path = directory.path("tool-data-key.db")
        try KeySlots.createDatabase(at: path, secret: .passphrase("p0"), kdf: .pbkdf2SHA512(iterations: 64_000))
        let reader = FMDatabase(path: path)
        XCTAssertTrue(reader.open())
        try reader.setKey(using: KeySlotKeyProvider(secret: .passphrase("p0")))
        XCTAssertEqual(reader.string(forQuery: "PRAGMA journal_mode = wal"), "wal")
        XCTAssertTrue(reader.executeUpdate("CREATE TABLE t (a)"))
        XCTAssertTrue(reader.executeUpdate("INSERT INTO t VALUES (1)"))
        XCTAssertTrue(reader.beginDeferredTransaction())
        XCTAssertEqual(reader.int(forQuery: "SELECT count(*) FROM t"), 1, "a read transaction holds the WAL")
        let result = try runTool(["rekey", "--data-key", path, "--key-env", "K", "--quiet"], env: ["K": "p0"])
        XCTAssertTrue(reader.rollback())
        reader.close()
        XCTAssertEqual(result.status, 3, result.stderr)
        let lines = result.stderr.split(separator: "\n").filter { !$0.isEmpty }
        XCTAssertEqual(lines.count, 1, "only the tool's own message: \(result.stderr)")
        XCTAssertTrue(result.stderr.contains("the WAL checkpoint is pending"), result.stderr)
        XCTAssertFalse(result.stderr.contains(" fmdb: "), "no library log line: \(result.stderr)")
        // The rotation took: a new connection opens the database through the slot (under the new data key).
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("p0")))
        let count: Int32? = queue.inDatabase { db in db.int(forQuery: "SELECT count(*) FROM t") }
        XCTAssertEqual(count, 1)
    }

    /// Scripts/rotate-key: a rekey whose checkpoint is pending is a finished rotation (it goes on to check
    /// the new key), never "still opens with the old key".
    func testRotateKeyScriptWithAReaderFinishesTheRotation() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/rotate-key").path
        let path = try makeDatabase("rotate.db", journalMode: "wal")
        // rotate-key uses the default passphrase KDF: key the file with the passphrase "old" first.
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: provider(Self.oldHex))
        XCTAssertEqual(try db.rekeySafely(using: PassphraseKeyProvider(Self.oldHex), busyTimeout: 1), .done)
        db.close()
        let holder = try Holder(helper: helper, path: path, mode: "read", passphrase: true)
        let result = try runProcess(
            "/bin/bash", [script, path], input: "",
            environment: [
                "OLD_DB_KEY": Self.oldHex, "NEW_DB_KEY": Self.newHex, "FMDB_CIPHER": tool, "BUSY_TIMEOUT": "0.5",
                "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            ])
        holder.release()
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stderr.contains("checkpoint is pending"), result.stderr)
        XCTAssertFalse(result.stderr.contains("still opens with the old key"), result.stderr)
        let check = try runProcess(tool, ["check", path, "--key-env", "K"], input: "", environment: ["K": Self.newHex])
        XCTAssertEqual(check.status, 0, "only the new passphrase opens it: \(check.stderr)")
    }

    /// A rekey that took but whose connection could not be reopened: a non-empty WAL beside the file is a
    /// pending checkpoint, never "done"; no WAL, or an empty one, is done.
    func testARekeyWithoutAConnectionIsCheckpointPendingWhileTheWALHoldsFrames() throws {
        let path = self.path("db")
        XCTAssertEqual(FMDatabase.outcomeWithoutAConnection(databasePath: path), .done, "no WAL")
        XCTAssertTrue(FileManager.default.createFile(atPath: path + "-wal", contents: Data()))
        XCTAssertEqual(FMDatabase.outcomeWithoutAConnection(databasePath: path), .done, "an empty WAL")
        XCTAssertTrue(FileManager.default.createFile(atPath: path + "-wal", contents: Data(count: 4096)))
        guard case .checkpointPending(let error) = FMDatabase.outcomeWithoutAConnection(databasePath: path) else {
            return XCTFail("a WAL with frames is a pending checkpoint")
        }
        XCTAssertEqual(error.resultCode, SQLITE_CANTOPEN)
        XCTAssertEqual(FMDatabase.outcomeWithoutAConnection(databasePath: nil), .done, "no file")
    }
}
