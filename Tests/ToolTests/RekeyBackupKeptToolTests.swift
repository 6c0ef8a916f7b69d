import Foundation
import XCTest

/// The side of a failed rekey that keeps its `--backup`: what this run did not write, or cannot check, stays.
extension RetryAfterFailureToolTests {
    var rekeyWithBackup: [String] {
        [
            "rekey", path("kept") + "/db", "--kdf", "raw", "--key-env", "OLD", "--new-kdf", "raw", "--new-key-env",
            "NEW", "--quiet", "--backup", path("kept") + "/db.bak",
        ]
    }

    var rawKeys: [String: String] { ["OLD": Self.rawKey, "NEW": Self.otherRawKey] }

    /// A plain rekey never writes PATH-keyslots: a file that appears there while it runs is another's, and stays
    /// when the rekey fails (the backup it wrote itself is removed).
    func testFailedRekeyLeavesAKeySlotFileItDidNotWrite() throws {
        let work = try reset("kept")
        let foreign = work + "/db.bak-keyslots"
        let busy = try holding(work + "/db", rawKey: Self.rawKey, slot: nil, mode: "immediate") {
            DispatchQueue.global().asyncAfter(deadline: .now() + 1) {
                _ = FileManager.default.createFile(atPath: foreign, contents: Data("another run's".utf8))
            }
            return try run(rekeyWithBackup + ["--busy-timeout", "3"], env: rawKeys)
        }
        XCTAssertEqual(busy.status, 75, busy.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: foreign), Data("another run's".utf8), busy.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work + "/db.bak"), busy.stderr)
        XCTAssertEqual(leftovers(work, expected: Self.base.union(["db.bak-keyslots"])), [], busy.stderr)
    }

    /// Neither key opens the database after the failed rekey (its pages were overwritten meanwhile): the backup
    /// stays, and the message says it may be the only copy, not to remove it.
    func testFailedRekeyKeepsTheBackupWhenNeitherKeyOpensTheDatabase() throws {
        let work = try reset("kept")
        let db = work + "/db"
        let busy = try holding(db, rawKey: Self.rawKey, slot: nil, mode: "immediate") {
            DispatchQueue.global().asyncAfter(deadline: .now() + 1) {
                guard let handle = FileHandle(forWritingAtPath: db) else { return }
                handle.seek(toFileOffset: 4096)
                handle.write(Data(repeating: 0x5A, count: 8192))
                handle.closeFile()
            }
            return try run(rekeyWithBackup + ["--busy-timeout", "3"], env: rawKeys)
        }
        XCTAssertNotEqual(busy.status, 0, busy.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: work + "/db.bak"), busy.stderr)
        // The overwritten pages fail as a wrong key (the old key does not open the file), or, where the
        // running SQLCipher reports them otherwise ("SQL logic error" on 4.x), the check could not be made:
        // either way the backup stays, and only the first says to keep it for good.
        let doesNotOpen = busy.stderr.contains("may be your only copy: keep it")
        XCTAssertTrue(doesNotOpen || busy.stderr.contains("could not be checked"), busy.stderr)
        if doesNotOpen { XCTAssertFalse(busy.stderr.contains("remove the backup"), busy.stderr) }
    }

    /// A backup written with --force over an existing file stays when the rekey then fails: the file it
    /// replaced is gone, so this one is the copy (the retry, with --force, replaces it again).
    func testFailedRekeyKeepsABackupThatReplacedAFileWithForce() throws {
        let work = try reset("kept")
        XCTAssertTrue(FileManager.default.createFile(atPath: work + "/db.bak", contents: Data("earlier".utf8)))
        let busy = try holding(work + "/db", rawKey: Self.rawKey, slot: nil, mode: "immediate") {
            try run(rekeyWithBackup + ["--busy-timeout", "0.2", "--force"], env: rawKeys)
        }
        XCTAssertEqual(busy.status, 75, busy.stderr)
        XCTAssertEqual(rowCount(work + "/db.bak", rawKey: Self.rawKey), 20, busy.stderr)
        let again = try run(rekeyWithBackup + ["--force"], env: rawKeys)
        XCTAssertEqual(again.status, 0, again.stderr)
    }

    /// The old-key check itself cannot be made (here a directory took the database's name while the rekey
    /// waited): "could not check" is not "opens", so the backup stays and the message says the check could not
    /// be made.
    func testFailedRekeyKeepsTheBackupWhenTheCheckCannotBeMade() throws {
        let work = try reset("kept")
        let db = work + "/db"
        let backup = work + "/db.bak"
        let busy = try holding(db, rawKey: Self.rawKey, slot: nil, mode: "immediate") {
            DispatchQueue.global().async {
                for _ in 0..<2000 where access(backup, F_OK) != 0 { usleep(1000) }
                _ = rename(db, db + ".moved")
                _ = mkdir(db, 0o700)
            }
            return try run(rekeyWithBackup + ["--busy-timeout", "2"], env: rawKeys)
        }
        XCTAssertNotEqual(busy.status, 0, busy.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: backup), busy.stderr)
        XCTAssertTrue(busy.stderr.contains("could not be checked"), busy.stderr)
    }
}
