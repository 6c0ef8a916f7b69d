@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A FIFO where the library opens a side file (`DB-keyslots`, a systemd credential) is refused at once,
/// never waited on: the open is non-blocking and the type check that follows refuses it.
final class SideFileFIFOTests: FMDBCipherTestCase {
    /// Runs `body` on another thread; fails the test (instead of hanging it) when it has not returned after a
    /// minute (a blocking open of a FIFO nobody opens would wait forever; a loaded machine is slow, not stuck).
    func withinAMinute(_ what: String, _ body: @escaping @Sendable () throws -> Void) {
        let done = DispatchSemaphore(value: 0)
        Thread {
            try? body()
            done.signal()
        }.start()
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "\(what) is waiting on the FIFO")
    }

    func testAFIFOAtTheKeySlotFileIsRefusedAtOnce() throws {
        let db = directory.path("app.db")
        _ = try KeySlots.createDatabase(at: db, secret: .passphrase("alpha"), kdf: .pbkdf2SHA512())
        let slots = KeySlots.slotFilePath(forDatabaseAt: db)
        XCTAssertEqual(unlink(slots), 0)
        XCTAssertEqual(mkfifo(slots, 0o600), 0)
        withinAMinute("KeySlots.list") {
            XCTAssertThrowsError(try KeySlots.list(forDatabaseAt: db)) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_CANTOPEN))
                XCTAssertTrue(nsError(error).localizedDescription.contains("not a regular file"), "\(error)")
            }
        }
    }

    func testAFIFOAsTheSystemdCredentialIsRefusedAtOnce() throws {
        let credentials = directory.path("creds")
        XCTAssertEqual(mkdir(credentials, 0o700), 0)
        XCTAssertEqual(mkfifo(credentials + "/db-key", 0o600), 0)
        withinAMinute("SystemdCredentialKeyProvider.read") {
            XCTAssertThrowsError(
                try SystemdCredentialKeyProvider.read(
                    credential: "db-key",
                    environment: ["CREDENTIALS_DIRECTORY": credentials])
            ) { error in
                XCTAssertEqual(nsError(error).code, Int(SQLITE_CANTOPEN))
                XCTAssertTrue(nsError(error).localizedDescription.contains("not a regular file"), "\(error)")
            }
        }
    }
}
