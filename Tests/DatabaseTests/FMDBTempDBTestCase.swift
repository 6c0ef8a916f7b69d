import FMDB
import Foundation
import TestSupport
import XCTest

/// FMDB's FMDBTempDBTests: every test gets its own database file in its own temporary directory (the base
/// test case's).
class FMDBTempDBTestCase: FMDBCipherTestCase {
    var db: FMDatabase!
    var databasePath: String { directory.path("test.db") }

    /// Override to fill the database before each test.
    class func populateDatabase(_ db: FMDatabase) {}

    override func setUpWithError() throws {
        try super.setUpWithError()
        db = FMDatabase(path: databasePath)
        XCTAssertTrue(db.open(), "Wasn't able to open database")
        Self.populateDatabase(db)
    }

    override func tearDown() {
        db?.close()
        db = nil
        super.tearDown()
    }
}
