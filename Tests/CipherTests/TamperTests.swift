@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Flipped bytes in page 1, in data pages and in the WAL; truncated, zeroed and random files; a
/// plaintext file with a key and an encrypted file without one. Every case either reads back the
/// original data or fails with SQLITE_NOTADB / SQLITE_CORRUPT: never a crash, a hang or wrong data.
final class TamperTests: FMDBCipherTestCase {
    var rng = SeededGenerator(seed: 0x7A3B)
    let key = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 * 13 + 5) })

    typealias Row = [String]

    /// All rows of `t`, or the error code reading them met.
    func readAll(_ path: String) -> Result<[Row], FMDatabaseError> {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open() else { return .failure(db.lastError() as! FMDatabaseError) }
        defer { db.close() }
        do {
            try db.setKey(using: RawKeyProvider(key: key))
            var rows: [Row] = []
            let rs = try db.executeQuery("SELECT id, v, hex(b) FROM t ORDER BY id", values: nil)
            while try rs.nextWithError() {
                rows.append((0..<3).map { rs.string(forColumnIndex: $0) ?? "NULL" })
            }
            return .success(rows)
        } catch let error as FMDatabaseError {
            return .failure(error)
        } catch {
            return .failure(FMDatabaseError(code: SQLITE_ERROR, message: "\(error)"))
        }
    }

    struct Tally: CustomStringConvertible {
        var cases = 0, original = 0, earlierCommit = 0, refused = 0, failures: [String] = []
        var codes: [Int32: Int] = [:]
        var description: String {
            "\(cases) cases: \(original) read the original data, \(earlierCommit) an earlier committed state, "
                + "\(refused) refused ("
                + codes.sorted { $0.key < $1.key }.map { "code \($0.key): \($0.value)" }.joined(separator: ", ")
                + "), "
                + "\(failures.count) failures"
        }
    }

    func judge(
        _ result: Result<[Row], FMDatabaseError>, expected: [Row], earlier: [[Row]], tally: inout Tally, context: String
    ) {
        tally.cases += 1
        switch result {
        case .success(let rows) where rows == expected:
            tally.original += 1
        case .success(let rows) where earlier.contains(rows):
            tally.earlierCommit += 1
        case .success(let rows):
            tally.failures.append("\(context): wrong data (\(rows.count) rows)")
        case .failure(let error) where [SQLITE_NOTADB, SQLITE_CORRUPT].contains(error.resultCode):
            tally.refused += 1
            tally.codes[error.resultCode, default: 0] += 1
        case .failure(let error):
            tally.failures.append("\(context): unexpected error \(error.resultCode) \(error.message)")
        }
    }

    func flip(_ bytes: inout Data, in range: Range<Int>) {
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let offset = Int.random(in: range, using: &rng)
            bytes[offset] ^= UInt8.random(in: 1...255, using: &rng)
        }
    }

    /// A database in rollback-journal mode, closed (everything in the main file).
    func makeFixture() throws -> (Data, [Row]) {
        let path = directory.path("fixture.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: RawKeyProvider(key: key))
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text, b blob)"))
        XCTAssertTrue(db.executeUpdate("create index t_v on t(v)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<300 {
            XCTAssertTrue(db.executeUpdate("insert into t (v, b) values (?, randomblob(40))", "value \(i)"))
        }
        XCTAssertTrue(db.commit())
        db.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        guard case .success(let rows) = readAll(path) else { throw XCTSkip("fixture unreadable") }
        return (bytes, rows)
    }

    func testFlippedBytesInPageOneAndDataPages() throws {
        let (original, expected) = try makeFixture()
        XCTAssertGreaterThan(original.count, 20 * 1024)
        let path = directory.path("case.db")
        var tally = Tally()
        for n in 0..<360 {
            var bytes = original
            let region = n % 3 == 0 ? 0..<1024 : 1024..<original.count
            flip(&bytes, in: region)
            try bytes.write(to: URL(fileURLWithPath: path))
            judge(
                readAll(path), expected: expected, earlier: [], tally: &tally,
                context: "case \(n) (\(n % 3 == 0 ? "page 1" : "data page"))")
        }
        print("tamper, main file: \(tally)")
        XCTAssertEqual(tally.failures, [], "\(tally)")
        XCTAssertEqual(tally.cases, 360)
        XCTAssertGreaterThan(tally.refused, 300, "flipped bytes are detected by the page HMAC")
    }

    func testFlippedBytesInTheWAL() throws {
        let path = directory.path("wal.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        try db.setKey(using: RawKeyProvider(key: key))
        XCTAssertEqual(db.string(forQuery: "pragma journal_mode=wal"), "wal")
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text, b blob)"))
        try db.checkpoint(.truncate)
        XCTAssertTrue(db.executeStatements("pragma wal_autocheckpoint=0"))
        var states: [[Row]] = []
        guard case .success(let empty) = readAll(path) else { return XCTFail("unreadable") }
        states.append(empty)
        for commit in 0..<8 {
            XCTAssertTrue(db.beginTransaction())
            for i in 0..<10 {
                XCTAssertTrue(db.executeUpdate("insert into t (v, b) values (?, randomblob(40))", "c\(commit)-\(i)"))
            }
            XCTAssertTrue(db.commit())
            guard case .success(let rows) = readAll(path) else { return XCTFail("unreadable") }
            states.append(rows)
        }
        let main = try Data(contentsOf: URL(fileURLWithPath: path))
        let wal = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
        db.close()
        let expected = states.removeLast()
        XCTAssertGreaterThan(wal.count, 8 * 1024)
        let casePath = directory.path("walcase.db")
        var tally = Tally()
        for n in 0..<200 {
            var walBytes = wal
            flip(&walBytes, in: 0..<wal.count)
            try? FileManager.default.removeItem(atPath: casePath + "-shm")
            try main.write(to: URL(fileURLWithPath: casePath))
            try walBytes.write(to: URL(fileURLWithPath: casePath + "-wal"))
            judge(readAll(casePath), expected: expected, earlier: states, tally: &tally, context: "WAL case \(n)")
        }
        print("tamper, WAL: \(tally)")
        XCTAssertEqual(tally.failures, [], "\(tally)")
        XCTAssertEqual(tally.cases, 200)
        // SQLite drops a WAL frame whose checksum fails, and every frame after it: a tampered WAL reads as
        // an earlier committed state, never as altered or uncommitted data (a known limit: SECURITY.md).
        XCTAssertEqual(tally.original + tally.earlierCommit + tally.refused, 200)
    }

    func testTruncatedZeroedAndRandomFiles() throws {
        let (original, expected) = try makeFixture()
        let path = directory.path("odd.db")
        var tally = Tally()
        var files: [Data] = []
        for cut in [1, 15, 16, 17, 100, 1023, 1024, 1025, 4096, original.count / 2, original.count - 1] {
            files.append(original.prefix(cut))
        }
        files.append(Data(count: original.count))
        files.append(Data((0..<original.count).map { _ in UInt8.random(in: 0...255, using: &rng) }))
        files.append(Data(repeating: 0xFF, count: 8192))
        for (n, bytes) in files.enumerated() {
            try bytes.write(to: URL(fileURLWithPath: path))
            let result = readAll(path)
            if bytes.count < 1024, case .failure(let error) = result, error.resultCode == SQLITE_ERROR,
                error.message.contains("no such table")
            {
                // SQLite reads a file shorter than one page as a new, empty database: a clean error, no data.
                tally.cases += 1
                tally.refused += 1
                continue
            }
            judge(result, expected: expected, earlier: [], tally: &tally, context: "odd file \(n)")
        }
        XCTAssertEqual(tally.failures, [], "\(tally)")
        // An encrypted file opened without a key, a plaintext file opened with one.
        try original.write(to: URL(fileURLWithPath: path))
        let unkeyed = FMDatabase(path: path)
        unkeyed.logsErrors = false
        XCTAssertTrue(unkeyed.open())
        XCTAssertNil(unkeyed.executeQuery("select * from t"))
        XCTAssertEqual(unkeyed.lastErrorCode(), SQLITE_NOTADB)
        unkeyed.close()
        let plainPath = directory.path("plain.db")
        let plain = FMDatabase(path: plainPath)
        XCTAssertTrue(plain.open())
        XCTAssertTrue(plain.executeUpdate("create table t (id integer primary key, v text, b blob)"))
        plain.close()
        guard case .failure(let error) = readAll(plainPath) else { return XCTFail("a key opened a plaintext file") }
        XCTAssertEqual(error.resultCode, SQLITE_NOTADB)
    }
}
