@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// No plaintext reaches the disk: not the database or its side files, and not SQLite's temporary files
/// (sorts, temp tables, VACUUM, statement journals), which a keyed connection keeps in memory.
final class LeakTests: FMDBCipherTestCase {
    static let marker = "LEAK-MARKER-9c41e7"

    /// Files this process has open outside the test's own directory that look like SQLite temp files.
    static func openTemporaryFiles(excluding folder: String) -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { fd -> String? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)") else {
                return nil
            }
            guard !target.hasPrefix(folder) else { return nil }
            let name = (target as NSString).lastPathComponent
            return name.hasPrefix("etilqs_") || target.contains("(deleted)") && target.contains("tmp") ? target : nil
        }
    }

    /// Runs a workload that makes SQLite want temporary files, probing for open temp files meanwhile.
    func runMixedWorkload(_ db: FMDatabase) throws -> [String] {
        let folder = directory.url.path
        var seen = Set<String>()
        var calls = 0
        db.makeFunctionNamed("probe", arguments: 1) { context, _, argv in
            calls += 1
            if calls % 97 == 1 {
                for file in LeakTests.openTemporaryFiles(excluding: folder) { seen.insert(file) }
            }
            db.resultLong(db.valueLong(argv[0]), context: context)
        }
        XCTAssertTrue(db.executeStatements("PRAGMA cache_size = 10"))
        XCTAssertTrue(db.executeUpdate("create table big (id integer primary key, v text, pad blob)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<4000 {
            XCTAssertTrue(
                db.executeUpdate(
                    "insert into big (v, pad) values (?, randomblob(300))", "\(Self.marker) \(i % 97) \(i)"))
        }
        XCTAssertTrue(db.commit())
        // A large sort on an unindexed column, a temp table, a statement journal, VACUUM.
        let rs = try db.executeQuery("select probe(id), v from big order by v desc, pad", values: nil)
        var rows = 0
        while rs.next() { rows += 1 }
        XCTAssertEqual(rows, 4000)
        XCTAssertTrue(db.executeUpdate("create temp table scratch as select v, pad from big order by pad"))
        XCTAssertEqual(db.int(forQuery: "select count(*) from scratch where probe(1)"), 4000)
        XCTAssertTrue(db.beginTransaction())
        XCTAssertTrue(db.executeUpdate("update big set v = v || ' " + Self.marker + "' where probe(id) % 2 = 0"))
        XCTAssertTrue(db.commit())
        XCTAssertTrue(db.executeUpdate("VACUUM"))
        _ = db.int(forQuery: "select count(distinct probe(length(v))) from big")
        return seen.sorted()
    }

    func assertNoMarkerOnDisk(_ context: String) {
        for (name, bytes) in directory.allFileBytes() {
            XCTAssertFalse(bytes.contains(bytes: Self.marker), "\(context): \(name) holds plaintext")
        }
    }

    func testKeyedConnectionsWriteNoPlaintextAnywhere() throws {
        for mode in ["wal", "delete", "truncate"] {
            let path = directory.path("leak-\(mode).db")
            let db = FMDatabase(path: path)
            XCTAssertTrue(db.open())
            try db.setKey(using: RawKeyProvider(key: Data(repeating: 0x42, count: 32)))
            XCTAssertEqual(db.string(forQuery: "pragma journal_mode=\(mode)"), mode)
            let temporaryFiles = try runMixedWorkload(db)
            XCTAssertEqual(temporaryFiles, [], "\(mode): a keyed connection opened temporary files")
            assertNoMarkerOnDisk("\(mode), open")
            XCTAssertTrue(db.rekey("a new key for the leak test"))
            assertNoMarkerOnDisk("\(mode), after rekey")
            db.close()
            assertNoMarkerOnDisk("\(mode), closed")
        }
    }

    func testTheProbeSeesTemporaryFilesOfAPlainConnection() throws {
        // The control: the same workload on an unkeyed connection does open SQLite temp files, so the
        // probe above would have seen them.
        let db = FMDatabase(path: directory.path("plain.db"))
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeStatements("PRAGMA temp_store = FILE"))
        let temporaryFiles = try runMixedWorkload(db)
        XCTAssertFalse(
            temporaryFiles.isEmpty, "the probe works: a plain connection with temp_store=FILE spills to temp files")
        db.close()
    }

    func testPageSizePragmaAndPlaintextBackupAreRefused() throws {
        let path = directory.path("refuse.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.setKey("k"))
        for sql in ["PRAGMA page_size = 4096", "pragma main.PAGE_SIZE=8192"] {
            XCTAssertFalse(db.executeStatements(sql), sql)
            XCTAssertEqual(db.lastErrorCode(), SQLITE_AUTH, sql)
            XCTAssertTrue(db.lastErrorMessage().contains("page_size is refused"), db.lastErrorMessage())
        }
        XCTAssertFalse(db.executeUpdate("PRAGMA page_size = 4096"))
        guard let handle = db.sqliteHandle else { return XCTFail("closed") }
        XCTAssertEqual(
            sqlite3_exec(OpaquePointer(handle), "PRAGMA page_size = 4096", nil, nil, nil), SQLITE_AUTH,
            "the C API is guarded too")
        // SQLCipher 4.6.1 still writes an unreadable file after PRAGMA page_size = N on a keyed database
        // (shown with its shell), so the guard stays on both lines. Reading it is fine: the default cipher
        // page size, 1024 bytes on 3.x, 4096 on 4.x.
        XCTAssertEqual(
            db.int(forQuery: "PRAGMA page_size"), CipherFormat.linkedDefault == .v4 ? 4096 : 1024, "reading it is fine")
        XCTAssertTrue(db.executeUpdate("create table x (a)"))
        XCTAssertTrue(db.executeUpdate("insert into x values (?)", Self.marker))

        let plain = FMDatabase(path: directory.path("backup-plain.db"))
        XCTAssertTrue(plain.open())
        XCTAssertThrowsError(try db.backup(to: plain)) { error in
            XCTAssertEqual(nsError(error).code, Int(SQLITE_MISUSE))
            XCTAssertTrue(nsError(error).localizedDescription.contains("plaintext"))
        }
        XCTAssertThrowsError(try plain.backup(to: db))
        plain.close()
        XCTAssertFalse(
            try Data(contentsOf: URL(fileURLWithPath: directory.path("backup-plain.db"))).contains(bytes: Self.marker))

        let copy = FMDatabase(path: directory.path("backup-enc.db"))
        XCTAssertTrue(copy.open())
        XCTAssertTrue(copy.setKey("k"))
        XCTAssertNoThrow(try db.backup(to: copy))
        XCTAssertEqual(copy.string(forQuery: "select a from x"), Self.marker)
        copy.close()
        db.close()
        XCTAssertFalse(
            try Data(contentsOf: URL(fileURLWithPath: directory.path("backup-enc.db"))).contains(bytes: Self.marker))
        let reopened = FMDatabase(path: path)
        XCTAssertTrue(reopened.open())
        XCTAssertNoThrow(try reopened.setKey(using: PassphraseKeyProvider("k")))
        XCTAssertEqual(
            reopened.string(forQuery: "pragma integrity_check"), "ok", "the refused pragma left the file readable")
        reopened.close()
    }

    func testDiskFullAndReadOnlyKeepWhatWasCommitted() throws {
        let path = directory.path("full.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        XCTAssertTrue(db.executeUpdate("create table t (a blob)"))
        XCTAssertTrue(db.executeUpdate("insert into t values (randomblob(500))"))
        // SQLite's own "disk full": the file may not grow past max_page_count.
        let pages = db.int(forQuery: "pragma page_count")
        XCTAssertEqual(db.int(forQuery: "pragma max_page_count = \(pages + 2)"), pages + 2)
        XCTAssertTrue(db.beginTransaction())
        var failed = false
        for _ in 0..<50 where !failed {
            if !db.executeUpdate("insert into t values (randomblob(900))") {
                failed = true
                XCTAssertEqual(db.lastErrorCode(), SQLITE_FULL)
                XCTAssertTrue(db.lastErrorMessage().contains("full"), db.lastErrorMessage())
            }
        }
        XCTAssertTrue(failed, "the database filled up")
        db.rollback()
        XCTAssertEqual(db.int(forQuery: "select count(*) from t"), 1, "what was committed is still there")
        db.close()

        let readOnly = FMDatabase(path: path)
        XCTAssertTrue(readOnly.open(withFlags: SQLITE_OPEN_READONLY))
        try readOnly.setKey(using: RawKeyProvider(key: Data(repeating: 7, count: 32)))
        XCTAssertFalse(readOnly.executeUpdate("insert into t values (1)"))
        XCTAssertEqual(readOnly.lastErrorCode(), SQLITE_READONLY)
        XCTAssertEqual(readOnly.int(forQuery: "select count(*) from t"), 1)
        readOnly.close()
    }
}
