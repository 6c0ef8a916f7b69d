import FMDB
import FMDBService
import Hummingbird
import Logging
import XCTest

@testable import NotesStore

/// Each disposition's HTTP answer: what a client can do about the error, never the error's text.
final class ErrorAnswerTests: XCTestCase {
    private let logger = testLogger()

    func testABusyDatabaseIsUnavailableWithRetryAfter() {
        let answer = httpError(for: FMDatabaseError(code: SQLITE_BUSY, message: "database is locked"), logger: logger)
        XCTAssertEqual(answer.status, .serviceUnavailable)
        XCTAssertEqual(answer.headers[.retryAfter], "1")
    }

    func testACancelledCallOrAServiceShuttingDownIsUnavailable() {
        XCTAssertEqual(httpError(for: CancellationError(), logger: logger).status, .serviceUnavailable)
        let shutDown = FMDatabaseServiceError(code: .shutDown, file: "notes.db")
        XCTAssertEqual(httpError(for: shutDown, logger: logger).status, .serviceUnavailable)
    }

    func testAPermanentErrorIsAnInternalErrorWhoseTextIsNotShown() {
        let error = FMDatabaseError(code: SQLITE_NOTADB, message: "file is not a database", sql: "SELECT secret")
        let answer = httpError(for: error, logger: logger)
        XCTAssertEqual(answer.status, .internalServerError)
        XCTAssertEqual(answer.body, "database error")
    }

    func testAnHTTPErrorPassesThrough() async throws {
        do {
            _ = try await answering(logger: logger) { () async throws -> Int in throw HTTPError(.notFound) }
            XCTFail("no error")
        } catch let error as HTTPError {
            XCTAssertEqual(error.status, .notFound)
        }
    }
}
