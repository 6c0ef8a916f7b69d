@testable import FMDB
import XCTest

/// SQLCipher's answer to `cipher_integrity_check` on a format without page HMACs is a refusal to check,
/// never a damaged page.
final class CipherIntegrityDeclineTests: XCTestCase {
    func testSQLCipherDecliningTheCheckIsNotAProblem() {
        XCTAssertTrue(FMDatabase.isCipherCheckDeclined("HMAC is not enabled, unable to integrity check"))
        XCTAssertFalse(FMDatabase.isCipherCheckDeclined("HMAC verification failed for page 3"))
        XCTAssertFalse(FMDatabase.isCipherCheckDeclined("ok"))
    }
}
