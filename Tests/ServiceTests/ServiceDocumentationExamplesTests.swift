import FMDB
import FMDBService
import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import XCTest

/// The README's set-up of the service (paths moved into the test's directory, the HTTP server replaced by a
/// service group that makes the request and then ends).
final class ServiceDocumentationExamplesTests: FMDBCipherTestCase {
    func testReadmeSetUp() async throws {
        let databasePath = try makeServiceDatabase("notes.db", key: 5) { db in
            try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            try db.execute("INSERT INTO notes (body) VALUES ('first')")
        }
        let keyFilePath = path("db.key")
        try writeKeyFile(keyFilePath, key: 5)
        let logger = Logger(label: "notes")
        let counted = Locked<Int32?>(nil)

        let database = FMDatabaseService(path: databasePath, keyFile: keyFilePath, holding: .rawKey)
        let httpServer = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(
                        service: Driver {
                            // In a request handler:
                            let count = try await database.perform { db in
                                db.int(forQuery: "SELECT count(*) FROM notes")
                            }
                            counted.withLock { $0 = count }
                        }, successTerminationBehavior: .gracefullyShutdownGroup)
                ], logger: logger))
        // The README's ServiceGroup(services:gracefulShutdownSignals:logger:), with the server's end shutting the
        // group down gracefully (a service that returns is otherwise an error for the group).
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: database),
                    .init(service: httpServer, successTerminationBehavior: .gracefullyShutdownGroup),
                ], gracefulShutdownSignals: [.sigterm], logger: logger))
        try await group.run()
        XCTAssertEqual(counted.withLock { $0 }, 1)
        XCTAssertEqual(database.statistics.phase, .stopped)
        XCTAssertEqual(database.statistics.pool.openConnections, 0)
    }
}
