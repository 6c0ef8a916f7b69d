import FMDB
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NotesStore
import XCTest

/// The API through the real HTTP stack: a live server on loopback, in this process.
final class NotesAPITests: XCTestCase {
    func testNotesAreCreatedReadListedAndDeleted() async throws {
        let directory = try TestDirectory()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(randomHexKey(), to: keyPath)
        let configuration = NotesConfiguration(
            store: NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath)))
        let (application, _) = buildApplication(configuration: configuration, logger: testLogger())

        try await application.test(.live) { client in
            let health = try await client.execute(uri: "/health", method: .get)
            XCTAssertEqual(health.status, .ok)
            XCTAssertTrue(String(buffer: health.body).contains(#""status":"ok""#))

            let created = try await client.execute(
                uri: "/notes", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"title":"first","body":"encrypted at rest"}"#))
            XCTAssertEqual(created.status, .created)
            let location = try XCTUnwrap(created.headers[.location])
            XCTAssertTrue(String(buffer: created.body).contains(#""body":"encrypted at rest""#))

            let read = try await client.execute(uri: location, method: .get)
            XCTAssertEqual(read.status, .ok)
            XCTAssertTrue(String(buffer: read.body).contains(#""title":"first""#))

            _ = try await client.execute(
                uri: "/notes", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"title":"second","body":""}"#))
            let list = try await client.execute(uri: "/notes?limit=10", method: .get)
            XCTAssertEqual(list.status, .ok)
            let titles = try JSONDecoder().decode([Title].self, from: Data(buffer: list.body)).map(\.title)
            XCTAssertEqual(titles, ["first", "second"])

            let deleted = try await client.execute(uri: location, method: .delete).status
            XCTAssertEqual(deleted, .noContent)
            let readAfterDelete = try await client.execute(uri: location, method: .get).status
            XCTAssertEqual(readAfterDelete, .notFound)
            let deletedAgain = try await client.execute(uri: location, method: .delete).status
            XCTAssertEqual(deletedAgain, .notFound)

            // The database service's metrics, under OpenTelemetry's names, in Prometheus' text format.
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            XCTAssertEqual(metrics.status, .ok)
            let text = String(buffer: metrics.body)
            XCTAssertTrue(text.contains("db_client_operation_duration"), text)
            XCTAssertTrue(text.contains(#"db_system_name="sqlite""#), text)
        }
    }

    func testMalformedRequestsAreRefusedWithoutTouchingTheDatabase() async throws {
        let directory = try TestDirectory()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(randomHexKey(), to: keyPath)
        let configuration = NotesConfiguration(
            store: NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath)))
        let (application, store) = buildApplication(configuration: configuration, logger: testLogger())

        try await application.test(.live) { client in
            let json: HTTPFields = [.contentType: "application/json"]
            let notJSON = try await client.execute(
                uri: "/notes", method: .post, headers: json, body: ByteBuffer(string: "{"))
            XCTAssertEqual(notJSON.status, .badRequest)
            let emptyTitle = try await client.execute(
                uri: "/notes", method: .post, headers: json, body: ByteBuffer(string: #"{"title":"","body":"x"}"#))
            XCTAssertEqual(emptyTitle.status, .badRequest)
            let notANumber = try await client.execute(uri: "/notes/abc", method: .get).status
            XCTAssertEqual(notANumber, .badRequest)
            let missing = try await client.execute(uri: "/notes/42", method: .get).status
            XCTAssertEqual(missing, .notFound)
            let count = try await store.database.perform { db in
                try db.fetchOne(Int.self, "SELECT count(*) FROM notes")
            }
            XCTAssertEqual(count, 0)
        }
    }

    /// The database is encrypted with the key file's key: another key does not open it, the right one does.
    func testTheDatabaseOpensWithTheKeyFileOnly() async throws {
        let directory = try TestDirectory()
        let key = randomHexKey()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(key, to: keyPath)
        let configuration = NotesConfiguration(
            store: NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath)))
        let (application, _) = buildApplication(configuration: configuration, logger: testLogger())
        try await application.test(.live) { client in
            let created = try await client.execute(
                uri: "/notes", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"title":"secret","body":"kept"}"#))
            XCTAssertEqual(created.status, .created)
        }

        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: directory.database,
                configuration: FMDatabaseConfiguration(keyProvider: rawKeyProvider(randomHexKey())))
        )
        let queue = try FMDatabaseQueue(
            path: directory.database, configuration: FMDatabaseConfiguration(keyProvider: rawKeyProvider(key)))
        let titles = try queue.inDatabase { db in try db.fetchAll(String.self, "SELECT title FROM notes") }
        XCTAssertEqual(titles, ["secret"])
        // The migrations ran once and were recorded; the database is in WAL mode.
        let applied = try queue.inDatabase { db in
            try db.fetchAll(String.self, "SELECT identifier FROM fmdb_migrations")
        }
        XCTAssertEqual(applied, ["createNotes"])
        let mode = try queue.inDatabase { db in try db.fetchOne(String.self, "PRAGMA journal_mode") }
        XCTAssertEqual(mode, "wal")
    }

    /// A start with a key that does not open the database fails with the database's error (code 26), which
    /// the service group reports; nothing is served.
    func testAStartWithAWrongKeyFails() async throws {
        let directory = try TestDirectory()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(randomHexKey(), to: keyPath)
        let configuration = NotesConfiguration(
            port: 0, store: NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath)))
        try await buildApplication(configuration: configuration, logger: testLogger()).application.test(.live) {
            client in
            let health = try await client.execute(uri: "/health", method: .get)
            XCTAssertEqual(health.status, .ok)
        }
        try writeKeyFile(randomHexKey(), to: keyPath)
        let (application, _) = buildApplication(configuration: configuration, logger: testLogger())
        let outcome = await withTaskGroup(of: String.self) { group in
            group.addTask {
                do {
                    try await application.run()
                    return "run() returned"
                } catch {
                    return "\((error as? FMDatabaseError)?.resultCode ?? -1) \(error)"
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))
                return "run() still running after 30 s"
            }
            let first = await group.next() ?? ""
            group.cancelAll()
            return first
        }
        XCTAssertTrue(outcome.hasPrefix("\(SQLITE_NOTADB) "), outcome)
    }

    private struct Title: Decodable { var title: String }
}
