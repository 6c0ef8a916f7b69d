@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// Trying a slot file's slots in turn is bounded before any key derivation: a slot file planted beside a
/// database (its public salt copied) with many expensive slots is refused with none tried, while every file
/// of the library's default slots, and every single slot, is within the budget. A wrong key names the slot
/// file it was tried against.
final class KeySlotWorkBudgetTests: FMDBCipherTestCase {
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)

    /// A single-key database (a raw key) with a planted slot file of 40 scrypt slots of N=2^17, r=8 (2^20
    /// units each: 40 of them exceed the budget of 2^25; 128 MiB and about a third of a second each).
    func makePlanted() throws -> (database: String, slotFile: String) {
        let database = try makeKeyedDatabase(
            "single.db", provider: RawKeyProvider(key: .raw(secure: SecureBytes(count: 32) { _ in }, salt: nil)))
        let slotFile = try PlantedSlotFile.write(besideDatabaseAt: database, count: 40, n: 1 << 17, r: 8)
        return (database, slotFile)
    }

    func testAPlantedFileOfExpensiveSlotsIsRefusedBeforeAnyKeyDerivation() throws {
        let (database, slotFile) = try makePlanted()
        let meter = KeySlotWorkBudget.Meter()
        let db = FMDatabase(path: database)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        try KeySlotWorkBudget.$meter.withValue(meter) {
            XCTAssertThrowsError(try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("a guess")))) { error in
                let error = error as? FMDatabaseError
                XCTAssertEqual(error?.resultCode, SQLITE_PERM)
                XCTAssertEqual(error?.exceedsKeySlotWorkBudget, true)
                XCTAssertTrue(error?.message.contains(slotFile) == true, error?.message ?? "")
                XCTAssertTrue(error?.message.contains("slotID") == true, error?.message ?? "")
                XCTAssertFalse(error?.message.contains("a guess") == true)
            }
            // A slot change unlocks the same way: refused as well, the file untouched.
            let before = try Data(contentsOf: URL(fileURLWithPath: slotFile))
            XCTAssertThrowsError(
                try KeySlots.addSlot(to: database, unlockingWith: .passphrase("a guess"), newSecret: .passphrase("b"))
            ) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.exceedsKeySlotWorkBudget, true)
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: slotFile)), before)
        }
        XCTAssertEqual(meter.derivations, 0, "no slot's key derivation ran")
    }

    func testASlotIDTriesThatSlotOnlyWhateverTheOthersCost() throws {
        let (database, slotFile) = try makePlanted()
        let meter = KeySlotWorkBudget.Meter()
        let provider = KeySlotKeyProvider(secret: .passphrase("a guess"), slotID: 7)
        let salt = try Data(contentsOf: URL(fileURLWithPath: database)).prefix(16)
        let request = KeyRequest(databasePath: database, salt: Data(salt))
        try KeySlotWorkBudget.$meter.withValue(meter) {
            XCTAssertThrowsError(try provider.key(for: request)) { error in
                let error = error as? FMDatabaseError
                XCTAssertEqual(error?.resultCode, SQLITE_NOTADB)
                XCTAssertTrue(error?.message.contains("No key slot 7 in \(slotFile)") == true, error?.message ?? "")
            }
        }
        XCTAssertEqual(meter.derivations, 1)
        XCTAssertEqual(meter.work, 1 << 20)
    }

    func testEveryFileOfDefaultSlotsAndEverySingleSlotIsWithinTheBudget() throws {
        func file(_ kdfs: [KeySlotFile.KDFParameters]) -> KeySlotFile {
            KeySlotFile(
                body: .init(
                    version: 1, databaseSalt: String(repeating: "00", count: 16), generation: 1,
                    pendingGeneration: nil,
                    slots: kdfs.enumerated().map { index, kdf in
                        KeySlotFile.Slot(id: index + 1, kind: "passphrase", created: 0, kdf: kdf, wraps: [])
                    }))
        }
        func scrypt(_ n: UInt64, _ r: UInt64) -> KeySlotFile.KDFParameters {
            .init(name: "scrypt", n: n, r: r, p: 1, iterations: nil, salt: "")
        }
        func pbkdf2(_ iterations: Int) -> KeySlotFile.KDFParameters {
            .init(name: "pbkdf2-sha512", n: nil, r: nil, p: nil, iterations: iterations, salt: "")
        }
        let maximum = KeySlotFile.maximumSlots
        let within: [[KeySlotFile.KDFParameters]] = [
            Array(repeating: scrypt(1 << 15, 8), count: maximum),  // the default KDF, a full file
            Array(repeating: pbkdf2(256_000), count: maximum),  // the default PBKDF2, a full file
            [scrypt(1 << 22, 8)],  // one slot at the scrypt bound
            [pbkdf2(10_000_000)],  // one slot at the PBKDF2 bound
        ]
        for kdfs in within {
            XCTAssertNoThrow(try KeySlotWorkBudget.check(file(kdfs), kind: .passphrase, slotPath: "x-keyslots"))
        }
        // Two slots at the bound, or a full file of strong slots, are not tried in turn.
        for kdfs in [[scrypt(1 << 22, 8), scrypt(1 << 14, 8)], Array(repeating: scrypt(1 << 20, 8), count: 5)] {
            XCTAssertThrowsError(try KeySlotWorkBudget.check(file(kdfs), kind: .passphrase, slotPath: "x-keyslots"))
        }
        // Only the slots of the secret's kind count.
        XCTAssertNoThrow(
            try KeySlotWorkBudget.check(
                file(Array(repeating: scrypt(1 << 22, 8), count: 3)), kind: .rawKey, slotPath: "x-keyslots"))
    }

    /// The library never writes a file its own unlock would refuse to try in turn: a slot that would put its
    /// kind over the budget is refused, and the file is left as it was. (A small limit stands in for 2^25,
    /// which only slots of seconds and gigabytes each could reach.)
    func testASlotThatWouldPutItsKindOverTheBudgetIsNotWritten() throws {
        let database = path("slotted.db")
        let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)  // 2,000 units
        try KeySlots.createDatabase(at: database, secret: .passphrase("alpha"), kdf: cheap)
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        try KeySlotWorkBudget.$limitInThisTask.withValue(5_000) {
            try KeySlots.addSlot(
                to: database, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("beta"), kdf: cheap)
            let before = try Data(contentsOf: URL(fileURLWithPath: slotFile))
            XCTAssertThrowsError(
                try KeySlots.addSlot(
                    to: database, unlockingWith: .passphrase("alpha"), newSecret: .passphrase("gamma"), kdf: cheap)
            ) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_MISUSE, "\(error)")
            }
            XCTAssertThrowsError(
                try KeySlots.changeSlot(
                    of: database, from: .passphrase("beta"), to: .passphrase("delta"),
                    kdf: .unsafePBKDF2SHA512(iterations: 2_000))
            ) { error in
                XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_MISUSE, "\(error)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: slotFile)), before, "nothing written")
            // A recovery slot costs no key derivation: it fits whatever the passphrase slots cost.
            XCTAssertNoThrow(try KeySlots.addRecoverySlot(to: database, unlockingWith: .passphrase("beta")))
            XCTAssertEqual(try KeySlots.list(forDatabaseAt: database).count, 3)
        }
    }

    func testADatabaseOfSeveralDefaultSlotsOpensThroughItsLastSlot() throws {
        let database = path("slotted.db")
        try KeySlots.createDatabase(at: database, secret: .passphrase("first passphrase"))
        try KeySlots.addSlot(
            to: database, unlockingWith: .passphrase("first passphrase"), newSecret: .passphrase("second passphrase"))
        try KeySlots.addSlot(
            to: database, unlockingWith: .passphrase("first passphrase"), newSecret: .passphrase("third passphrase"))
        let meter = KeySlotWorkBudget.Meter()
        try KeySlotWorkBudget.$meter.withValue(meter) {
            let db = FMDatabase(path: database)
            XCTAssertTrue(db.open())
            defer { db.close() }
            try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("third passphrase")))
            XCTAssertEqual(db.int(forQuery: "select count(*) from sqlite_master"), 0)
        }
        XCTAssertEqual(meter.derivations, 3, "every slot tried in turn, the last one accepts")
    }

    func testAWrongKeyNamesTheSlotFile() throws {
        let database = path("slotted.db")
        try KeySlots.createDatabase(at: database, secret: .passphrase("alpha"), kdf: cheap)
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        let db = FMDatabase(path: database)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertThrowsError(try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("not alpha")))) { error in
            let error = error as? FMDatabaseError
            XCTAssertEqual(error?.resultCode, SQLITE_NOTADB)
            XCTAssertTrue(error?.message.contains("No key slot in \(slotFile) accepts") == true, error?.message ?? "")
            XCTAssertFalse(error?.message.contains("not alpha") == true)
        }
        XCTAssertThrowsError(
            try KeySlots.addSlot(to: database, unlockingWith: .passphrase("not alpha"), newSecret: .passphrase("b"))
        ) { error in
            XCTAssertTrue((error as? FMDatabaseError)?.message.contains(slotFile) == true, "\(error)")
        }
    }
}
