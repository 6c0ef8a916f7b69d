import FMDB
import Foundation
import TestSupport
import XCTest

/// Errors are matched by code with `~=`, in `switch` and `catch`, never by domain strings.
final class ResultCodeTests: FMDBCipherTestCase {
    func testACatchClauseMatchesTheErrorsCode() throws {
        let db = FMDatabase()
        XCTAssertTrue(db.open())
        defer { db.close() }
        try db.executeUpdate("CREATE TABLE t (a UNIQUE)", values: nil)
        try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
        var caught = ""
        do {
            try db.executeUpdate("INSERT INTO t VALUES (1)", values: nil)
        } catch FMResultCode.busy {
            caught = "busy"
        } catch FMResultCode.constraint {
            caught = "constraint"
        } catch {
            caught = "other: \(error)"
        }
        XCTAssertEqual(caught, "constraint", "SQLITE_CONSTRAINT_UNIQUE is in the SQLITE_CONSTRAINT family")
    }

    func testPrimaryCodesMatchTheirExtendedCodesAndNotTheOtherWayRound() {
        let ioWrite = FMResultCode(rawValue: SQLITE_IOERR | (3 << 8))  // SQLITE_IOERR_WRITE
        XCTAssertTrue(FMResultCode.ioError ~= ioWrite)
        XCTAssertTrue(ioWrite ~= ioWrite)
        XCTAssertFalse(ioWrite ~= FMResultCode.ioError, "an extended pattern matches only itself")
        XCTAssertFalse(FMResultCode.full ~= ioWrite)
        XCTAssertEqual(ioWrite.primary, .ioError)
        switch FMResultCode(rawValue: SQLITE_BUSY | (2 << 8)) {  // SQLITE_BUSY_SNAPSHOT
        case .locked: XCTFail("not locked")
        case .busy: break
        default: XCTFail("busy's family")
        }
    }

    func testErrorsOfOtherDomainsMatchNothing() {
        let foreign = NSError(domain: "Elsewhere", code: Int(SQLITE_BUSY))
        XCTAssertNil(FMResultCode(foreign))
        XCTAssertFalse(FMResultCode.busy ~= foreign)
        // An NSError in the library's domain (bridged or rebuilt) still matches, by its extended code.
        let bridged = NSError(
            domain: FMDatabaseError.domain, code: Int(SQLITE_IOERR),
            userInfo: ["extendedCode": Int(SQLITE_IOERR | (4 << 8))])
        XCTAssertEqual(FMResultCode(bridged)?.rawValue, SQLITE_IOERR | (4 << 8))
        XCTAssertTrue(FMResultCode.ioError ~= bridged)
        XCTAssertEqual(FMDatabaseError(code: SQLITE_NOTADB).resultCodeValue, .notADatabase)
        XCTAssertEqual(FMResultCode.permission.rawValue, SQLITE_PERM)
        XCTAssertTrue(FMResultCode.permission ~= FMDatabaseError(code: SQLITE_PERM))
        XCTAssertFalse(FMResultCode.permission ~= FMDatabaseError(code: SQLITE_AUTH))
    }

    func testADamagedKeySlotFileIsMarkedAndAWrongSecretIsNot() throws {
        let path = self.path("slots.db")
        let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)
        try KeySlots.createDatabase(at: path, secret: .passphrase("right"), kdf: cheap)
        XCTAssertThrowsError(try KeySlots.withDataKeyHex(of: path, unlockingWith: .passphrase("wrong")) { _ in }) {
            error in
            XCTAssertTrue(FMResultCode.notADatabase ~= error, "\(error)")
            XCTAssertEqual((error as? FMDatabaseError)?.isDamagedKeySlotFile, false)
        }
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: path)
        try Data("not a slot file".utf8).write(to: URL(fileURLWithPath: slotFile))
        XCTAssertThrowsError(try KeySlots.list(forDatabaseAt: path)) { error in
            XCTAssertTrue(FMResultCode.corrupt ~= error, "\(error)")
            XCTAssertEqual((error as? FMDatabaseError)?.isDamagedKeySlotFile, true)
        }
    }
}
