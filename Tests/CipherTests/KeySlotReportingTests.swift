@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// What a program learns from key slots on its own, as the tool does: the slot file a failed unlock is
/// about (`FMDatabaseError.keySlotFile`) and the warnings of slot changes (`KeySlots.withWarningReceiver`).
final class KeySlotReportingTests: FMDBCipherTestCase {
    func testAWrongSecretNamesTheSlotFileNoSlotAccepts() throws {
        let path = directory.path("slotted.db")
        try KeySlots.createDatabase(
            at: path, secret: .passphrase("alpha"), kdf: .unsafePBKDF2SHA512(iterations: 1_000))
        let db = FMDatabase(path: path)
        db.logsErrors = false
        XCTAssertTrue(db.open())
        defer { db.close() }
        XCTAssertThrowsError(try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("wrong")))) { error in
            let error = error as? FMDatabaseError
            XCTAssertEqual(error?.resultCode, SQLITE_NOTADB, "\(String(describing: error))")
            XCTAssertEqual(error?.keySlotFile, KeySlots.slotFilePath(forDatabaseAt: path))
        }
        // An error about something else names no slot file.
        try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("alpha")))
        XCTAssertThrowsError(try db.executeUpdate("insert into missing values (1)", values: nil)) { error in
            XCTAssertNotNil(error as? FMDatabaseError)
            XCTAssertNil((error as? FMDatabaseError)?.keySlotFile)
        }
    }

    func testWarningsGoToTheReceiverOnlyInsideItsScope() {
        let received = Locked<[String]>([])
        let receiver: @Sendable (String) -> Void = { text in received.withLock { $0.append(text) } }
        KeySlots.withWarningReceiver(receiver) {
            KeySlots.warn("the slot file's directory could not be synced")
        }
        // Outside the scope the warning goes to the "fmdb" logger, not to the receiver.
        KeySlots.warn("after the scope")
        XCTAssertEqual(received.withLock { $0 }, ["the slot file's directory could not be synced"])
    }
}
