import FMDB
import Foundation
import TestSupport
import XCTest

/// `FMDatabase.inspectFile(atPath:)`: what a path holds, without SQLite and without a key.
final class FileInspectionTests: FMDBCipherTestCase {
    func testEveryKindOfPath() throws {
        XCTAssertEqual(FMDatabase.inspectFile(atPath: directory.path("nothing")), .missing)
        XCTAssertEqual(FMDatabase.inspectFile(atPath: directory.path("nothing/below")), .missing)
        XCTAssertEqual(FMDatabase.inspectFile(atPath: directory.url.path), .directory)

        let empty = directory.path("empty.db")
        XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))
        XCTAssertEqual(FMDatabase.inspectFile(atPath: empty), .empty)

        let short = directory.path("short.db")
        XCTAssertTrue(FileManager.default.createFile(atPath: short, contents: Data("SQLite".utf8)))
        XCTAssertEqual(FMDatabase.inspectFile(atPath: short), .truncated)

        let plain = directory.path("plain.db")
        let db = FMDatabase(path: plain)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        db.close()
        XCTAssertEqual(FMDatabase.inspectFile(atPath: plain), .plaintext)

        let encrypted = directory.path("encrypted.db")
        let keyed = FMDatabase(path: encrypted)
        XCTAssertTrue(keyed.open())
        try keyed.setKey(using: PassphraseKeyProvider("inspect"))
        XCTAssertTrue(keyed.executeUpdate("create table t (a)"))
        keyed.close()
        let head = try XCTUnwrap(FileHandle(forReadingAtPath: encrypted)?.read(upToCount: 16))
        XCTAssertEqual(FMDatabase.inspectFile(atPath: encrypted), .encrypted(salt: head))

        let link = directory.path("link.db")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: plain)
        XCTAssertEqual(FMDatabase.inspectFile(atPath: link), .plaintext, "a link the caller named is followed")
    }

    /// A FIFO is reported without being read (reading it would block until a writer came).
    func testAFIFOIsNotARegularFileAndDoesNotBlock() throws {
        let fifo = directory.path("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertEqual(FMDatabase.inspectFile(atPath: fifo), .notRegularFile)
        XCTAssertEqual(FMDatabase.inspectFile(atPath: "/dev/null"), .notRegularFile)
    }

    func testAnUnreadableFile() throws {
        try XCTSkipIf(getuid() == 0, "root reads every file: run as another user to test permissions")
        let locked = directory.path("locked.db")
        XCTAssertTrue(FileManager.default.createFile(atPath: locked, contents: Data(repeating: 7, count: 32)))
        XCTAssertEqual(chmod(locked, 0), 0)
        XCTAssertEqual(FMDatabase.inspectFile(atPath: locked), .unreadable)
    }
}
