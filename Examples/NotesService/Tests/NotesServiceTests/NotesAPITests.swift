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
        let (application, _) = try buildApplication(configuration: configuration, logger: testLogger())

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
        }
    }

    func testMalformedRequestsAreRefusedWithoutTouchingTheDatabase() async throws {
        let directory = try TestDirectory()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(randomHexKey(), to: keyPath)
        let configuration = NotesConfiguration(
            store: NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath)))
        let (application, store) = try buildApplication(configuration: configuration, logger: testLogger())

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
        }
        let count = try await store.pool.perform { db in try db.fetchOne(Int.self, "SELECT count(*) FROM notes") }
        XCTAssertEqual(count, 0)
    }

    /// The database is encrypted with the key file's key: another key does not open it, the right one does.
    func testTheDatabaseOpensWithTheKeyFileOnly() async throws {
        let directory = try TestDirectory()
        let key = randomHexKey()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(key, to: keyPath)
        let settings = NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath))
        let store = try NotesStore(settings: settings, logger: testLogger())
        _ = try await store.create(NewNote(title: "secret", body: "kept"))
        store.close()

        XCTAssertThrowsError(
            try FMDatabaseQueue(
                path: directory.database,
                configuration: FMDatabaseConfiguration(keyProvider: rawKeyProvider(randomHexKey())))
        )
        let queue = try FMDatabaseQueue(
            path: directory.database, configuration: FMDatabaseConfiguration(keyProvider: rawKeyProvider(key)))
        let titles = try queue.inDatabase { db in try db.fetchAll(String.self, "SELECT title FROM notes") }
        XCTAssertEqual(titles, ["secret"])
        // The migrations ran once and were recorded.
        let applied = try queue.inDatabase { db in
            try db.fetchAll(String.self, "SELECT identifier FROM fmdb_migrations")
        }
        XCTAssertEqual(applied, ["createNotes"])
    }

    /// A start with a key that does not open the database fails with a clear error, and nothing is served.
    func testAStartWithAWrongKeyFails() throws {
        let directory = try TestDirectory()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(randomHexKey(), to: keyPath)
        let settings = NotesStore.Settings(path: directory.database, keySource: .file(path: keyPath))
        try NotesStore(settings: settings, logger: testLogger()).close()
        try writeKeyFile(randomHexKey(), to: keyPath)
        XCTAssertThrowsError(try NotesStore(settings: settings, logger: testLogger())) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.resultCode, SQLITE_NOTADB, "\(error)")
        }
    }

    private struct Title: Decodable { var title: String }
}
