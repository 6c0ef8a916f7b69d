import FMDB
import Foundation
import TestSupport
import XCTest

/// SQLCipher 4.6 writes "ERROR CORE ... hmac check failed" to standard error for every page it cannot
/// authenticate; the library reports a wrong key as error 26 instead and turns that log off once per
/// process. The first keyed open of a fresh process must already be quiet, whichever way it keys.
final class SQLCipherLogTests: FMDBCipherTestCase {
    func testAWrongKeyAtTheFirstOpenOfAProcessLogsNothingToStandardError() throws {
        let helper = try builtHelper()
        let path = self.path("enc.db")
        let db = FMDatabase(path: path)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.setKey("the right key"))
        XCTAssertTrue(db.executeUpdate("CREATE TABLE t (a)"))
        db.close()
        for way in ["fmdb", "sql"] {
            let result = try runProcess(helper, ["wrong-key", path, "a wrong key", way])
            XCTAssertEqual(result.status, 0, "\(way): \(result.stderr)")
            XCTAssertEqual(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "code 26", way)
            XCTAssertFalse(result.stderr.contains("hmac check failed"), "\(way): \(result.stderr)")
            XCTAssertFalse(result.stderr.contains("ERROR CORE"), "\(way): \(result.stderr)")
        }
    }
}
