@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// `fmdb-cipher keys ...` and `rekey --data-key` on a slotted database whose rotation is pending (the
/// slot file wraps the old and the new data key, the database is under the new one) while the file
/// cannot be read at once: never drop the generation that opens it, never print a key that does not.
/// Also the rotation's exit codes, a secret added twice, and a damaged slot file.
final class KeysToolPendingTests: ToolTestCase {
    /// "alpha" (slot 1) and "beta" (slot 2), cheap PBKDF2, one row; WAL when asked.
    func makeSlotted(wal: Bool = false) throws -> String {
        let path = directory.path("app.db")
        let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)
        try KeySlots.createDatabase(at: path, secret: .passphrase("alpha"), kdf: cheap)
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: cheap)
        let db = try open(path)
        defer { db.close() }
        if wal { XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = WAL"), "wal") }
        try db.executeUpdate("create table t (a text)", values: nil)
        try db.executeUpdate("insert into t values ('slotted')", values: nil)
        return path
    }

    /// A crash after the rotation's rekey committed, before its last slot file write.
    func makePending(_ path: String, _ second: String = "beta") throws {
        _ = try KeySlots.rotateDataKey(
            of: path, secrets: [.passphrase("alpha"), .passphrase(second)],
            droppingUnmatchedSlots: false, finishing: false)
        XCTAssertTrue(try slotText(path).contains("pendingGeneration"))
    }

    func slotText(_ path: String) throws -> String {
        try String(contentsOfFile: KeySlots.slotFilePath(forDatabaseAt: path), encoding: .utf8)
    }

    func open(_ path: String, _ passphrase: String = "alpha") throws -> FMDatabase {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        try db.setKey(using: KeySlotKeyProvider(secret: .passphrase(passphrase)))
        return db
    }

    func opens(_ path: String, _ passphrase: String) -> Bool {
        let result = try? run(
            ["sql", path, "--kdf", "slot", "--key-env", "K", "--csv", "select a from t"], env: ["K": passphrase])
        return result?.status == 0 && result?.stdout.contains("slotted") == true
    }

    /// An exclusive lock on `path` held by this process, released after `seconds` (nil: by the caller).
    func holdLock(_ path: String, for seconds: Double?) throws -> @Sendable () -> Void {
        holdExclusiveLock(try open(path), running: "BEGIN EXCLUSIVE; INSERT INTO t VALUES ('held')", for: seconds)
    }

    func testExportRawAndAddWaitForALockAndKeepTheKeyThatOpens() throws {
        let db = try makeSlotted()
        try makePending(db)
        var release = try holdLock(db, for: 2.5)
        let exported = try run(
            ["keys", "export-raw", db, "--key-env", "K", "--i-understand-this-reveals-the-data-key"], env: ["K": "beta"]
        )
        release()
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let raw = FMDatabase(path: db)
        XCTAssertTrue(raw.open())
        try raw.setKey(
            using: RawKeyProvider(
                key: XCTUnwrap(Data(hex: exported.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))))
        XCTAssertEqual(raw.string(forQuery: "select a from t"), "slotted", "the printed key opens the database")
        raw.close()
        release = try holdLock(db, for: 2.5)
        let added = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": "alpha", "N": "gamma"])
        release()
        XCTAssertEqual(added.status, 0, added.stderr)
        for passphrase in ["alpha", "beta", "gamma"] { XCTAssertTrue(opens(db, passphrase), passphrase) }
    }

    func testChangeAndRemoveWaitForALockAndKeepTheKeyThatOpens() throws {
        let db = try makeSlotted()
        try makePending(db)
        var release = try holdLock(db, for: 2.5)
        let changed = try run(
            ["keys", "change", db, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": "beta", "N": "delta"])
        release()
        XCTAssertEqual(changed.status, 0, changed.stderr)
        XCTAssertTrue(opens(db, "delta"))
        try makePending(db, "delta")
        release = try holdLock(db, for: 2.5)
        let removed = try run(["keys", "remove", db, "--key-env", "K", "--slot", "2"], env: ["K": "alpha"])
        release()
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertTrue(opens(db, "alpha"))
        XCTAssertFalse(try slotText(db).contains("pendingGeneration"))
    }

    func testALockNeverReleasedIsBusyAndNothingIsPrintedOrDropped() throws {
        let db = try makeSlotted()
        try makePending(db)
        let before = try slotText(db)
        let release = try holdLock(db, for: nil)
        let exported = try run(
            ["keys", "export-raw", db, "--key-env", "K", "--i-understand-this-reveals-the-data-key"],
            env: ["K": "alpha"])
        release()
        XCTAssertEqual(exported.status, 75, exported.stderr)
        XCTAssertEqual(exported.stdout, "", "no key printed")
        XCTAssertEqual(try slotText(db), before)
        XCTAssertTrue(opens(db, "alpha"))
    }

    func testAHotJournalIsRolledBackBeforeTheKeyIsChosen() throws {
        let db = try makeSlotted()
        try makePending(db)
        let copy = directory.path("crashed.db")
        do {
            let writer = try open(db)
            defer { writer.close() }
            XCTAssertTrue(writer.executeStatements("PRAGMA cache_size = 2; BEGIN"))
            for _ in 0..<200 {
                try writer.executeUpdate("insert into t values (?)", values: [String(repeating: "s", count: 2_000)])
            }
            try FileManager.default.copyItem(atPath: db, toPath: copy)
            try FileManager.default.copyItem(atPath: db + "-journal", toPath: copy + "-journal")
            try FileManager.default.copyItem(
                atPath: KeySlots.slotFilePath(forDatabaseAt: db), toPath: KeySlots.slotFilePath(forDatabaseAt: copy))
            writer.rollback()
        }
        let added = try run(
            ["keys", "add", copy, "--key-env", "K", "--new-key-env", "N", "--slot-kdf", "pbkdf2"],
            env: ["K": "alpha", "N": "gamma"])
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertTrue(opens(copy, "alpha"))
        XCTAssertTrue(opens(copy, "gamma"))
    }

    /// The same three outcomes as plain rekey: a checkpoint pending is exit 3, not 0 "rotated".
    func testRotationInWALWithAReaderOpenIsExit3() throws {
        let db = try makeSlotted(wal: true)
        let reader = try open(db)
        XCTAssertTrue(reader.beginDeferredTransaction())
        XCTAssertEqual(reader.string(forQuery: "select a from t"), "slotted")
        let other = directory.path("beta.pass")
        try Data("beta\n".utf8).write(to: URL(fileURLWithPath: other))
        let rotated = try run(
            ["rekey", "--data-key", db, "--key-env", "K", "--slot-key-file", other, "--quiet"],
            env: ["K": "alpha"])
        reader.rollback()
        reader.close()
        XCTAssertEqual(rotated.status, 3, rotated.stderr)
        XCTAssertTrue(rotated.stderr.contains("checkpoint is pending"), rotated.stderr)
        XCTAssertTrue(opens(db, "alpha"))
    }

    func testASecretAddedTwiceIsAUsageError() throws {
        let db = try makeSlotted()
        let again = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N"], env: ["K": "alpha", "N": "beta"])
        XCTAssertEqual(again.status, 64, again.stderr)
        XCTAssertTrue(again.stderr.contains("already opens key slot 2"), again.stderr)
        XCTAssertFalse(again.stderr.contains("beta"))
    }

    /// A slot file whose tag or structure is bad is damage (exit 2), not a wrong key (65).
    func testADamagedSlotFileIsExit2AndAWrongKeyStays65() throws {
        let db = try makeSlotted()
        let slots = KeySlots.slotFilePath(forDatabaseAt: db)
        let text = try slotText(db)
        let macLine = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix("mac ") })
        let flipped = String(macLine.dropLast()) + (macLine.hasSuffix("0") ? "1" : "0")
        try Data(text.replacingOccurrences(of: macLine, with: flipped).utf8).write(to: URL(fileURLWithPath: slots))
        for arguments in [
            ["sql", db, "--kdf", "slot", "--key-env", "K", "select 1"],
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N"],
        ] {
            let result = try run(arguments, env: ["K": "alpha", "N": "gamma"])
            XCTAssertEqual(result.status, 2, result.stderr)
            XCTAssertTrue(result.stderr.contains("damaged"), result.stderr)
        }
        try Data(text.utf8).write(to: URL(fileURLWithPath: slots))
        let wrong = try run(["sql", db, "--kdf", "slot", "--key-env", "K", "select 1"], env: ["K": "nope"])
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
    }
}
