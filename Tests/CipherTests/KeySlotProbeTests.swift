@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Which data key a slotted database is under is asked of the file, and only a positive answer drives a
/// write, an escrow or a key handed out: a lock, a hot journal or an I/O error is "could not check", never
/// "does not open". Also: every rekey path keeps rekeySafely's three outcomes, a plain rekey of a slotted
/// database is refused, revocation is checked on the file as written, and a recovery key's symbols are
/// wiped.
final class KeySlotProbeTests: FMDBCipherTestCase {
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)

    /// A slotted database ("alpha", slot 1; "beta", slot 2) with one row, WAL when asked.
    func makeSlotted(_ name: String = "slotted.db", wal: Bool = false) throws -> String {
        let path = directory.path(name)
        try KeySlots.createDatabase(at: path, secret: .passphrase("alpha"), kdf: cheap)
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: cheap)
        let db = try open(path, .passphrase("alpha"))
        defer { db.close() }
        if wal { XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = WAL"), "wal") }
        try db.executeUpdate("create table t (a text, b blob)", values: nil)
        try db.executeUpdate("insert into t values ('slotted', NULL)", values: nil)
        return path
    }

    /// The state a crash right after a rotation's rekey committed leaves: the slot file pending (both
    /// generations wrapped), the database under the new data key.
    func makePendingAfterCommit(_ path: String) throws {
        _ = try KeySlots.rotateDataKey(
            of: path, secrets: [.passphrase("alpha"), .passphrase("beta")],
            droppingUnmatchedSlots: false, finishing: false)
        XCTAssertTrue(try slotText(path).contains("pendingGeneration"))
    }

    func open(_ path: String, _ secret: KeySlotSecret) throws -> FMDatabase {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        try db.setKey(using: KeySlotKeyProvider(secret: secret))
        return db
    }

    func readRow(_ path: String, _ secret: KeySlotSecret) throws -> String? {
        let db = try open(path, secret)
        defer { db.close() }
        return db.string(forQuery: "select a from t")
    }

    func slotText(_ path: String) throws -> String {
        try String(contentsOfFile: KeySlots.slotFilePath(forDatabaseAt: path), encoding: .utf8)
    }

    func slotBytes(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: KeySlots.slotFilePath(forDatabaseAt: path)))
    }

    func assertFails(_ code: Int32, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as NSError).code, Int(code), "\(error)", file: file, line: line)
        }
    }

    /// Another connection holding an exclusive lock on `path` (keyed with the data key the database is
    /// under), released after `seconds` (never when nil). Call the returned closure to release it.
    func holdExclusiveLock(_ path: String, for seconds: Double?) throws -> () -> Void {
        TestSupport.holdExclusiveLock(
            try open(path, .passphrase("alpha")), running: "BEGIN EXCLUSIVE; INSERT INTO t VALUES ('held', NULL)",
            for: seconds)
    }

    // MARK: - A pending rotation is settled only on a positive answer

    func testALockHeldForAWhileIsWaitedForNotTakenForTheOldKey() throws {
        let path = try makeSlotted()
        try makePendingAfterCommit(path)
        let release = try holdExclusiveLock(path, for: 2.5)
        defer { release() }
        try KeySlots.addSlot(to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("gamma"), kdf: cheap)
        XCTAssertFalse(try slotText(path).contains("pendingGeneration"))
        for secret in ["alpha", "beta", "gamma"] {
            XCTAssertEqual(try readRow(path, .passphrase(secret)), "slotted", secret)
        }
    }

    func testExportRawWaitsForALockAndHandsOutOnlyTheKeyThatOpens() throws {
        let path = try makeSlotted()
        try makePendingAfterCommit(path)
        let release = try holdExclusiveLock(path, for: 2.5)
        defer { release() }
        let hex = try KeySlots.withDataKeyHex(of: path, unlockingWith: .passphrase("beta")) {
            String(decoding: $0, as: UTF8.self)
        }
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.setKey(using: RawKeyProvider(key: XCTUnwrap(Data(hex: hex))))
        XCTAssertEqual(db.string(forQuery: "select a from t"), "slotted")
    }

    func testALockNeverReleasedRefusesWithBusyAndDropsNothing() throws {
        let path = try makeSlotted()
        try makePendingAfterCommit(path)
        let before = try slotBytes(path)
        let release = try holdExclusiveLock(path, for: nil)
        let started = Date()
        assertFails(SQLITE_BUSY) {
            try KeySlots.removeSlot(2, from: path, unlockingWith: .passphrase("alpha"))
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 9, "one busy timeout, not one per key")
        XCTAssertEqual(try slotBytes(path), before, "the pending slot file is untouched")
        release()
        XCTAssertEqual(try readRow(path, .passphrase("beta")), "slotted")
        try KeySlots.removeSlot(2, from: path, unlockingWith: .passphrase("alpha"))
        XCTAssertEqual(try readRow(path, .passphrase("alpha")), "slotted")
    }

    /// A copy of the files taken in the middle of a commit that spilled pages into the main file: the
    /// journal beside it is hot. A read-only check cannot roll it back; the read-write one does.
    func testAHotJournalIsRolledBackNotTakenForTheOldKey() throws {
        let path = try makeSlotted()
        try makePendingAfterCommit(path)
        let copy = directory.path("crashed.db")
        do {
            let writer = try open(path, .passphrase("alpha"))
            defer { writer.close() }
            XCTAssertTrue(writer.executeStatements("PRAGMA cache_size = 2; BEGIN"))
            for _ in 0..<200 {
                try writer.executeUpdate(
                    "insert into t values ('spill', ?)", values: [Data(repeating: 0x5A, count: 2_000)])
            }
            let journal = try Data(contentsOf: URL(fileURLWithPath: path + "-journal"))
            XCTAssertGreaterThan(journal.count, 0)
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            try journal.write(to: URL(fileURLWithPath: copy + "-journal"))
            try FileManager.default.copyItem(
                atPath: KeySlots.slotFilePath(forDatabaseAt: path),
                toPath: KeySlots.slotFilePath(forDatabaseAt: copy))
            writer.rollback()
        }
        try KeySlots.changeSlot(of: copy, from: .passphrase("beta"), to: .passphrase("delta"), kdf: cheap)
        XCTAssertFalse(try slotText(copy).contains("pendingGeneration"))
        XCTAssertEqual(try readRow(copy, .passphrase("alpha")), "slotted")
        XCTAssertEqual(try readRow(copy, .passphrase("delta")), "slotted")
    }

    // MARK: - Rekey outcomes

    func testRotationInWALWithAReaderOpenReportsTheCheckpointPending() throws {
        let path = try makeSlotted(wal: true)
        let reader = try open(path, .passphrase("alpha"))
        defer { reader.close() }
        XCTAssertTrue(reader.beginDeferredTransaction())
        XCTAssertEqual(reader.string(forQuery: "select a from t"), "slotted")
        let outcome = try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("alpha"), .passphrase("beta")])
        guard case .checkpointPending = outcome else { return XCTFail("\(outcome)") }
        reader.rollback()
        XCTAssertEqual(try readRow(path, .passphrase("beta")), "slotted")
    }

    func testAPlainRekeyOfASlottedDatabaseIsRefusedOnEveryPath() throws {
        let path = try makeSlotted()
        let db = try open(path, .passphrase("alpha"))
        assertFails(SQLITE_MISUSE) { try db.rekey(using: PassphraseKeyProvider("new")) }
        assertFails(SQLITE_MISUSE) { try db.rekeySafely(using: PassphraseKeyProvider("new")) }
        XCTAssertFalse(db.rekey("new"))
        XCTAssertEqual(db.lastErrorCode(), SQLITE_MISUSE)
        XCTAssertTrue(db.lastErrorMessage().contains("rotateDataKey"), db.lastErrorMessage())
        XCTAssertFalse(db.rekeyWith(Data("new".utf8)))
        db.close()
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha")))
        assertFails(SQLITE_MISUSE) { try queue.rekey(using: PassphraseKeyProvider("new")) }
        queue.close()
        let pool = try FMDatabasePool(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("alpha")))
        assertFails(SQLITE_MISUSE) { try pool.rekey(using: PassphraseKeyProvider("new"), busyTimeout: 1) }
        pool.releaseAllDatabases()
        XCTAssertEqual(try readRow(path, .passphrase("beta")), "slotted", "every slot still opens it")
        XCTAssertEqual(
            try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("alpha"), .passphrase("beta")]), .done)
        XCTAssertEqual(try readRow(path, .passphrase("alpha")), "slotted")
    }

    // MARK: - Revocation

    /// A slot file with a second slot for "alpha", as `addSlot` made before it refused that.
    func addDuplicateSlot(_ path: String) throws {
        let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
        let opened = try KeySlots.unlock(
            try Data(contentsOf: URL(fileURLWithPath: slotPath)), secret: .passphrase("alpha"),
            slotID: nil, databaseSalt: try KeySlots.databaseSalt(path), slotPath: slotPath)
        var file = opened.file
        file.body.slots.append(
            try file.makeSlot(id: 9, secret: .passphrase("alpha"), kdf: cheap, dataKeys: opened.dataKeys))
        try KeySlotStorage.writeAtomically(file.serialized(dataKeys: opened.dataKeys), to: slotPath)
    }

    func testASecretThatOpensASlotIsNotAddedTwice() throws {
        let path = try makeSlotted()
        assertFails(SQLITE_MISUSE) {
            try KeySlots.addSlot(
                to: path, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: self.cheap)
        }
        assertFails(SQLITE_MISUSE) {
            try KeySlots.changeSlot(of: path, from: .passphrase("alpha"), to: .passphrase("beta"), kdf: self.cheap)
        }
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [1, 2])
    }

    func testChangingASecretThatOpensTwoSlotsRevokesItEverywhere() throws {
        let path = try makeSlotted()
        try addDuplicateSlot(path)
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [1, 2, 9])
        assertFails(SQLITE_MISUSE) { try KeySlots.removeSlot(9, from: path, unlockingWith: .passphrase("alpha")) }
        try KeySlots.changeSlot(of: path, from: .passphrase("alpha"), to: .passphrase("delta"), kdf: cheap)
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .passphrase("alpha")) }
        XCTAssertEqual(try readRow(path, .passphrase("delta")), "slotted")
        XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).map(\.id), [1, 2])
        try KeySlots.removeSlot(1, from: path, unlockingWith: .passphrase("delta"))
        assertFails(SQLITE_NOTADB) { _ = try self.readRow(path, .passphrase("delta")) }
    }

    // MARK: - Costs and wiping

    /// In-bounds before, each would make one unlock run for minutes to hours.
    func testSlotCostsAboveWhatTheLibraryMakesAreDamage() throws {
        let scryptPath = directory.path("scrypt.db")
        try KeySlots.createDatabase(at: scryptPath, secret: .passphrase("alpha"))
        let pbkdf2Path = try makeSlotted("pbkdf2.db")
        let edits: [(String, String, String)] = [
            (scryptPath, "\"p\":1", "\"p\":65535"),
            (scryptPath, "\"r\":8", "\"r\":8192"),
            (scryptPath, "\"n\":32768", "\"n\":4194304,\"p\":2"),
            (pbkdf2Path, "\"iterations\":1000", "\"iterations\":100000000"),
        ]
        for (path, from, to) in edits {
            let slotPath = KeySlots.slotFilePath(forDatabaseAt: path)
            let original = try slotBytes(path)
            let text = String(decoding: original, as: UTF8.self)
            XCTAssertNotNil(text.range(of: from))
            let edited = text.replacingOccurrences(of: from, with: to).replacingOccurrences(
                of: "\"p\":1,\"p\":2", with: "\"p\":2")
            try Data(edited.utf8).write(to: URL(fileURLWithPath: slotPath))
            assertFails(SQLITE_CORRUPT) { _ = try KeySlots.list(forDatabaseAt: path) }
            try original.write(to: URL(fileURLWithPath: slotPath))
        }
        XCTAssertThrowsError(
            try KeySlots.addSlot(
                to: scryptPath, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("x"),
                kdf: .scrypt(n: 1 << 14, r: 8, p: 1024)))
        XCTAssertThrowsError(
            try KeySlots.addSlot(
                to: scryptPath, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("x"),
                kdf: .pbkdf2SHA512(iterations: 10_000_001)))
    }

    func testRecoveryKeySymbolsLiveInWipedStorage() throws {
        let wiped = Locked([String]())
        SecureBytes.setWipeObserver { buffer in
            wiped.withLock {
                $0.append(buffer.allSatisfy { $0 == 0 } ? "zero:\(buffer.count)" : "DIRTY:\(buffer.count)")
            }
        }
        defer { SecureBytes.setWipeObserver(nil) }
        var text = ""
        do {
            let generated = try RecoveryKeyCode.generate()
            text = generated.text.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        let afterFormat = wiped.withLock { $0 }
        XCTAssertTrue(afterFormat.contains("zero:36"), "the symbols of a generated key were wiped: \(afterFormat)")
        wiped.withLock { $0.removeAll() }
        do {
            let secret = try KeySlotSecret.recoveryKey(text.lowercased())
            XCTAssertEqual(secret.bytes.count, 20)
        }
        let afterParse = wiped.withLock { $0 }
        XCTAssertTrue(afterParse.contains("zero:36"), "the decoded symbols were wiped: \(afterParse)")
        XCTAssertFalse(afterParse.contains { $0.hasPrefix("DIRTY") })
    }
}
