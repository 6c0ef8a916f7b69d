import FMDB
import Foundation
import TestSupport
import XCTest

/// A plaintext header of 96 bytes or more leaves SQLite's whole 100-byte header in the clear, so the file
/// starts exactly as a plaintext database does. Page 1 tells them apart: SQLCipher's is ciphertext after the
/// header, with its IV in the reserved bytes; a plaintext database's reads as SQLite's.
final class LargePlaintextHeaderTests: FMDBCipherTestCase {
    let salt = Data((0..<16).map { UInt8(0x10 + $0) })
    let key = Data(repeating: 0x5A, count: 32)

    func requirePlaintextHeaders() throws {
        let probe = FMDatabase(path: nil)
        XCTAssertTrue(probe.open())
        defer { probe.close() }
        try probe.setKey(using: RawKeyProvider(key: key))
        guard probe.string(forQuery: "PRAGMA cipher_plaintext_header_size") != nil else {
            throw XCTSkip("the running SQLCipher (\(probe.cipherVersion ?? "?")) has no plaintext headers")
        }
    }

    func testHeadersThatCoverSQLitesWholeHeaderAreNamedWithTheirSize() throws {
        try requirePlaintextHeaders()
        for (size, tables) in [(32, 1), (64, 1), (80, 1), (96, 1), (112, 1), (128, 3), (256, 2), (112, 0), (256, 0)] {
            let file = path("header-\(size)-\(tables).db")
            let settings = CipherSettings(plaintextHeaderSize: size, salt: salt)
            let db = FMDatabase(path: file)
            XCTAssertTrue(db.open())
            try db.setKey(using: RawKeyProvider(key: key), settings: settings)
            for table in 0..<tables { XCTAssertTrue(db.executeUpdate("CREATE TABLE t\(table) (a, b TEXT)")) }
            db.close()
            let head = try XCTUnwrap(FileManager.default.contents(atPath: file))
            XCTAssertEqual(head.prefix(16), Data("SQLite format 3\0".utf8), "\(size): SQLite's magic in the clear")
            XCTAssertEqual(
                FMDatabase.inspectFile(atPath: file), .encryptedWithPlaintextHeader(size: size),
                "\(size) bytes, \(tables) tables")
            let reopened = FMDatabase(path: file)
            XCTAssertTrue(reopened.open())
            try reopened.setKey(using: RawKeyProvider(key: key), settings: settings)
            XCTAssertEqual(reopened.int(forQuery: "SELECT count(*) FROM sqlite_master"), Int32(tables))
            reopened.close()
        }
    }

    /// A plaintext database that reserves bytes per page as SQLCipher does (16, a multiple of its block) is
    /// still plaintext: SQLite leaves the reserved bytes zero and page 1 reads as its own.
    func testAPlaintextDatabaseWithReservedBytesIsPlaintext() throws {
        for tables in [0, 1, 5, 40] {
            let file = path("reserved-\(tables).db")
            let db = FMDatabase(path: file)
            XCTAssertTrue(db.open())
            var reserve: Int32 = 16
            // SQLITE_FCNTL_RESERVE_BYTES (38): SQLite 3.32 and later; the SQLite under SQLCipher 3.4.1 lacks it.
            let reserveBytes: Int32 = 38
            guard sqlite3_file_control(OpaquePointer(db.sqliteHandle), "main", reserveBytes, &reserve) == SQLITE_OK
            else {
                db.close()
                throw XCTSkip("the running SQLite cannot reserve bytes per page (SQLITE_FCNTL_RESERVE_BYTES)")
            }
            XCTAssertTrue(db.executeUpdate("CREATE TABLE seed (a)"))
            db.logsErrors = false
            guard db.executeUpdate("VACUUM") else {
                // SQLCipher 4.19's VACUUM refuses a plaintext database whose reserve was changed this way
                // (SQLITE_MISUSE, "unable to open database"); the hand-made page below covers such files there.
                let error = db.lastErrorMessage()
                db.close()
                throw XCTSkip("the running SQLCipher cannot VACUUM a plaintext database to a new reserve: \(error)")
            }
            XCTAssertTrue(db.executeUpdate("DROP TABLE seed"))
            for table in 0..<tables {
                XCTAssertTrue(db.executeUpdate("CREATE TABLE t\(table) (a, b TEXT, c BLOB)"))
                XCTAssertTrue(db.executeUpdate("CREATE INDEX i\(table) ON t\(table) (b)"))
            }
            db.close()
            let head = try XCTUnwrap(FileManager.default.contents(atPath: file))
            XCTAssertEqual(head[20], 16, "the file reserves 16 bytes per page")
            XCTAssertEqual(FMDatabase.inspectFile(atPath: file), .plaintext, "\(tables) tables")
        }
    }

    /// A plaintext page 1 with bytes left in its reserved area (a tool that decrypted it in place) and stale
    /// bytes in its free space reads, by the heuristic, as a "header" of 2,000 bytes: more than SQLCipher
    /// takes (1,024), so it is plaintext, and the tools do not refuse it.
    func testAHeaderLargerThanSQLCipherTakesIsPlaintext() throws {
        var page = [UInt8](repeating: 0, count: 4096)
        page.replaceSubrange(0..<16, with: Array("SQLite format 3\0".utf8))
        page[16] = 0x10  // page size 4096
        page[18] = 1
        page[19] = 1
        page[20] = 16  // 16 reserved bytes per page
        page[21] = 64
        page[22] = 32
        page[23] = 32
        page[27] = 1  // change counter
        page[31] = 1  // one page
        page[95] = 1  // version-valid-for: the change counter's copy
        page[47] = 4  // schema format
        page[100] = 0x0D  // an empty leaf table b-tree page
        page[105] = 0x0F  // content starts at 4080, where the reserved bytes begin
        page[106] = 0xF0
        for index in 2000..<2016 { page[index] = 0x5C }  // stale bytes in the free space
        for index in 4080..<4096 { page[index] = 0xAB }  // bytes left in the reserved area
        let file = path("stale.db")
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data(page)))
        XCTAssertEqual(FMDatabase.inspectFile(atPath: file), .plaintext)
    }
}
