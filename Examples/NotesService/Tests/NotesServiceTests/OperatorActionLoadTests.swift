import FMDB
import Foundation
import Hummingbird
import HummingbirdTesting
import NotesStore
import XCTest

/// A load run (8 clients, 250 rounds each: 4,200 requests, at most 45 s) on the live server through each
/// operator action of the "Running a service" article that a running service takes, in the article's order of
/// steps. Each checks: no failed request but those the article names for that action, no acknowledged write
/// lost (every 201 is in the database, as posted, when it is opened again with the final key), the old key no
/// longer opens the file, and the server's resident memory grew less than `memoryGrowthBound` from warm-up to
/// end.
final class OperatorActionLoadTests: XCTestCase {
    /// The resident memory the process may gain between the warm-up and the end of a run.
    let memoryGrowthBound = 32 * 1024 * 1024

    /// A plain `fmdb-cipher rekey`, the new key written to the service's key file before it: the service's
    /// reloadable provider reads the file again when it meets the new key. No request may fail.
    func testPlainRekeyWithTheNewKeyInTheKeyFile() async throws {
        let directory = try TestDirectory()
        let oldKey = randomHexKey()
        let newKey = randomHexKey()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(oldKey, to: keyPath)
        // The operator's copies: the tool reads both keys from files, never from its arguments.
        try writeKeyFile(oldKey, to: directory.path + "/old.key")
        let outcome = try await runUnderLoad(directory: directory, keySource: .file(path: keyPath)) { _, _ in
            // 1. The new key where the service reads it; 2. the rekey. Nothing else.
            try writeKeyFile(newKey, to: keyPath)
            try rekeyWithTheTool(directory, oldKeyFile: directory.path + "/old.key", newKeyFile: keyPath)
        }
        try check(outcome, final: rawKeyProvider(newKey), old: rawKeyProvider(oldKey), allowedFailures: { _ in false })
    }

    /// A plain rekey of a service with a fixed key (a systemd credential): requests that need a new connection
    /// fail (code 26, answered 500) from the rekey's end until the reload hands the pool the new key, as the
    /// article says; none before the rekey or after the reload. The reload is the call SIGHUP makes
    /// (`testSIGHUPReloadsTheKey` sends the signal itself), awaited here so that the window has an end.
    func testFixedKeyRekeyThenReload() async throws {
        let directory = try TestDirectory()
        let oldKey = randomHexKey()
        let newKey = randomHexKey()
        let credentials = try makeCredentialsDirectory(in: directory, key: oldKey)
        try writeKeyFile(oldKey, to: directory.path + "/old.key")
        try writeKeyFile(newKey, to: directory.path + "/new.key")
        let outcome = try await runUnderLoad(
            directory: directory, keySource: .credential(name: "notes-db-key"),
            environment: ["CREDENTIALS_DIRECTORY": credentials]
        ) { store, _ in
            try rekeyWithTheTool(
                directory, oldKeyFile: directory.path + "/old.key", newKeyFile: directory.path + "/new.key")
            // The key source now holds the new key (here the test's credential directory; under systemd, a
            // key file the reload reads: see the article), and the operator reloads.
            try writeKeyFile(newKey, to: credentials + "/notes-db-key", mode: 0o400)
            try await store.database.reloadKey()
        }
        try check(outcome, final: rawKeyProvider(newKey), old: rawKeyProvider(oldKey)) { record in
            // The documented failures: a 500 for a request that overlapped the time between the rekey and the
            // reload's end.
            record.status == 500 && record.ended >= outcome.actionStarted && record.started <= outcome.actionEnded
        }
        let failed = outcome.report.records.filter { !$0.succeeded }.count
        print("fixed-key rekey: \(failed) requests answered 500 between the rekey and the reload (documented)")
    }

    /// SIGHUP makes the running service read its key source again and hand the pool the new key: after a
    /// fixed-key rekey, the service fails until the signal, and serves again after it.
    func testSIGHUPReloadsTheKey() async throws {
        let directory = try TestDirectory()
        let oldKey = randomHexKey()
        let newKey = randomHexKey()
        let credentials = try makeCredentialsDirectory(in: directory, key: oldKey)
        try writeKeyFile(oldKey, to: directory.path + "/old.key")
        try writeKeyFile(newKey, to: directory.path + "/new.key")
        let settings = NotesStore.Settings(
            path: directory.database, keySource: .credential(name: "notes-db-key"),
            environment: ["CREDENTIALS_DIRECTORY": credentials])
        let (application, store) = buildApplication(
            configuration: NotesConfiguration(store: settings), logger: testLogger())
        try await application.test(.live) { client in
            let healthBefore = try await client.execute(uri: "/health", method: .get).status
            XCTAssertEqual(healthBefore, .ok)
            try rekeyWithTheTool(
                directory, oldKeyFile: directory.path + "/old.key", newKeyFile: directory.path + "/new.key")
            // No connection left that passed its key check under the old key.
            try await store.database.withPool { pool in pool.releaseAllDatabases() }
            let healthAfterRekey = try await client.execute(uri: "/health", method: .get).status
            XCTAssertEqual(healthAfterRekey, .internalServerError)
            try writeKeyFile(newKey, to: credentials + "/notes-db-key", mode: 0o400)
            kill(getpid(), SIGHUP)
            try await waitUntilHealthy(port: try XCTUnwrap(client.port))
        }
    }

    /// An in-process `rekey(using:)` of the service's own pool, the new key written to the key file first (so
    /// that a restart finds it): no request may fail.
    func testInProcessRekeyUsingANewProvider() async throws {
        let directory = try TestDirectory()
        let oldKey = randomHexKey()
        let newKey = randomHexKey()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(oldKey, to: keyPath)
        let outcome = try await runUnderLoad(directory: directory, keySource: .file(path: keyPath)) { store, _ in
            try writeKeyFile(newKey, to: keyPath)
            let outcome = try await store.database.withPool { pool in
                try await pool.rekey(using: rawKeyProvider(newKey))
            }
            XCTAssertEqual(outcome, .done)
        }
        try check(outcome, final: rawKeyProvider(newKey), old: rawKeyProvider(oldKey), allowedFailures: { _ in false })
    }

    /// A slotted database: `fmdb-cipher keys change` of the service's slot, the service given its new secret
    /// and reloaded, then `rekey --data-key`, in the article's order. No request may fail.
    func testSlotChangeThenDataKeyRotation() async throws {
        let directory = try TestDirectory()
        let oldSecret = randomHexKey()
        let newSecret = randomHexKey()
        let keyPath = directory.path + "/db.key"
        try writeKeyFile(oldSecret, to: keyPath)
        // The operator's copies of the secrets.
        try writeKeyFile(oldSecret, to: directory.path + "/old.secret")
        try writeKeyFile(newSecret, to: directory.path + "/new.secret")
        try runToolToTheEnd(["keys", "init", directory.database, "--kdf", "slot-raw", "--key-file", keyPath])
        let outcome = try await runUnderLoad(
            directory: directory, keySource: .file(path: keyPath), keyKind: .slotRawKey
        ) { store, _ in
            // 1. The service's slot gets its new secret; the service keeps serving with the data key it holds.
            try runToolToTheEnd([
                "keys", "change", directory.database, "--kdf", "slot-raw", "--key-file", directory.path + "/old.secret",
                "--new-kdf", "slot-raw", "--new-key-file", directory.path + "/new.secret",
            ])
            // 2. The service is given its new secret and reloaded.
            try writeKeyFile(newSecret, to: keyPath)
            try await store.database.reloadKey()
            // 3. Only then the data key is rotated.
            try runToolToTheEnd([
                "rekey", "--data-key", directory.database, "--kdf", "slot-raw", "--key-file",
                directory.path + "/new.secret", "--busy-timeout", "10", "--quiet",
            ])
        }
        try check(
            outcome, final: KeySlotKeyProvider(secret: .rawKey(Data(hex: newSecret))),
            old: KeySlotKeyProvider(secret: .rawKey(Data(hex: oldSecret))), allowedFailures: { _ in false })
    }

    // MARK: - The run

    struct Outcome: Sendable {
        var report: LoadReport
        var actionStarted: ContinuousClock.Instant
        var actionEnded: ContinuousClock.Instant
        var warmedUpAt: ContinuousClock.Instant
        var memoryAtWarmUp: Int
        var memoryAtEnd: Int
        var database: String
        var name: String
    }

    /// Starts the live server, seeds the database (about 17 MB, so that a rekey has pages to re-encrypt for a
    /// while), starts the load, runs `action` once a quarter of the rounds are done, and returns what the
    /// clients saw once the load ended and the server stopped.
    func runUnderLoad(
        directory: TestDirectory, keySource: DatabaseKeySource, keyKind: DatabaseKeyKind = .rawKey,
        environment: [String: String] = [:],
        name: String = #function, action: @escaping @Sendable (NotesStore, Int) async throws -> Void
    ) async throws -> Outcome {
        let settings = NotesStore.Settings(
            path: directory.database, keySource: keySource, keyKind: keyKind, environment: environment)
        let (application, store) = buildApplication(
            configuration: NotesConfiguration(store: settings), logger: testLogger())
        let outcome = try await application.test(.live) { client in
            let port = try XCTUnwrap(client.port)
            try await store.database.performTransaction(.immediate) { db in
                let body = String(repeating: "seed ", count: 400)
                for index in 0..<8_000 {
                    try db.execute(
                        "INSERT INTO notes (title, body, created) VALUES (?, ?, ?)", "seed \(index)", body, Date())
                }
            }
            // The seed's pages into the file now, so that no write of the run pays for checkpointing them.
            try await store.database.perform { db in try db.checkpoint(.truncate) }
            let load = LoadRun(port: port, deadline: .now + .seconds(45))
            async let report = load.run()
            while load.completedRounds.load(ordering: .relaxed) < load.clients * load.rounds / 4 {
                try await Task.sleep(for: .milliseconds(5))
            }
            let warmedUpAt = ContinuousClock.now
            let memoryAtWarmUp = try residentMemory()
            let actionStarted = ContinuousClock.now
            do {
                try await action(store, port)
            } catch {
                _ = await report
                throw error
            }
            let actionEnded = ContinuousClock.now
            let finished = await report
            return Outcome(
                report: finished, actionStarted: actionStarted, actionEnded: actionEnded, warmedUpAt: warmedUpAt,
                memoryAtWarmUp: memoryAtWarmUp, memoryAtEnd: try residentMemory(), database: directory.database,
                name: name)
        }
        // Graceful shutdown ended with the server: the database service closed every connection.
        let statistics = store.database.statistics
        XCTAssertEqual(statistics.phase, .stopped)
        XCTAssertEqual(statistics.pool.openConnections, 0)
        return outcome
    }

    /// The checks every run passes, and its numbers on standard output (the article quotes them).
    func check(
        _ outcome: Outcome, final: any KeyProvider, old: any KeyProvider, allowedFailures: (RequestRecord) -> Bool
    ) throws {
        let records = outcome.report.records
        let failures = records.filter { !$0.succeeded && !allowedFailures($0) }
        XCTAssertEqual(failures.count, 0, "failed requests: \(failures.prefix(5))")
        XCTAssertEqual(outcome.report.mismatches, [])
        XCTAssertGreaterThan(outcome.report.acknowledged.count, 500, "the load ran")
        // The action happened under load: requests ran after it ended.
        XCTAssertTrue(records.contains { $0.started > outcome.actionEnded }, "the load ended before the action did")

        // Every acknowledged note, as posted, with the final key; the old key no longer opens the file.
        let queue = try FMDatabaseQueue(
            path: outcome.database, configuration: FMDatabaseConfiguration(keyProvider: final))
        let stored = try queue.inDatabase { db in
            try db.fetchAll(Note.self, "SELECT * FROM notes WHERE title NOT LIKE 'seed %'")
        }
        let byID = Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) })
        let lost = outcome.report.acknowledged.filter { byID[$0.id]?.title != $0.title || byID[$0.id]?.body != $0.body }
        XCTAssertEqual(lost.count, 0, "acknowledged writes lost or changed: \(lost.prefix(5).map(\.id))")
        queue.close()
        XCTAssertThrowsError(
            try FMDatabaseQueue(path: outcome.database, configuration: FMDatabaseConfiguration(keyProvider: old)))

        let growth = outcome.memoryAtEnd - outcome.memoryAtWarmUp
        XCTAssertLessThan(growth, memoryGrowthBound, "resident memory grew \(growth / 1024) KiB")

        let before = records.filter {
            $0.kind == .create && $0.started >= outcome.warmedUpAt - .seconds(2) && $0.ended < outcome.actionStarted
        }
        let during = records.filter {
            $0.kind == .create && $0.ended >= outcome.actionStarted && $0.started <= outcome.actionEnded
        }
        let unavailable = records.reduce(0) { $0 + $1.retriedUnavailable }
        print(
            """
            \(outcome.name): \(records.count) requests, \(outcome.report.acknowledged.count) notes acknowledged, \
            \(records.filter { !$0.succeeded }.count) failed (\(failures.count) undocumented), \(unavailable) 503s \
            retried; action \(milliseconds(outcome.actionEnded - outcome.actionStarted)) ms; POST p50/p99 before \
            \(milliseconds(percentile(before, 0.5)))/\(milliseconds(percentile(before, 0.99))) ms (\(before.count)), \
            during \(milliseconds(percentile(during, 0.5)))/\(milliseconds(percentile(during, 0.99))) ms \
            (\(during.count)); RSS \(outcome.memoryAtWarmUp / 1_048_576) -> \(outcome.memoryAtEnd / 1_048_576) MiB; \
            database \(fileSize(outcome.database) / 1_048_576) MiB
            """)
    }
}

/// The size of the file at `path` in bytes, 0 when it cannot be read.
func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

func percentile(_ records: [RequestRecord], _ fraction: Double) -> Duration {
    let sorted = records.map(\.duration).sorted()
    guard !sorted.isEmpty else { return .zero }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

func milliseconds(_ duration: Duration) -> String {
    String(format: "%.1f", Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15)
}

// MARK: - Operator actions

/// `fmdb-cipher rekey` as an operator's script runs it: a few attempts while the service holds the write
/// lock past the busy timeout (exit 75: nothing changed).
func rekeyWithTheTool(_ directory: TestDirectory, oldKeyFile: String, newKeyFile: String) throws {
    try runToolToTheEnd([
        "rekey", directory.database, "--kdf", "raw", "--key-file", oldKeyFile, "--new-kdf", "raw",
        "--new-key-file", newKeyFile, "--busy-timeout", "10", "--quiet",
    ])
}

struct ToolFailed: Error {
    var status: Int32
    var errors: String
}

/// Runs the tool as an operator's script does: again while it exits 75 (busy: nothing changed), a few times.
func runToolToTheEnd(_ arguments: [String]) throws {
    for attempt in 1...5 {
        let (status, errors) = try runTool(arguments)
        if status == 0 { return }
        XCTAssertEqual(status, 75, "fmdb-cipher \(arguments.first ?? ""): \(errors)")
        if status != 75 || attempt == 5 { throw ToolFailed(status: status, errors: errors) }
    }
}

/// Polls /health until it answers 200 (the reload took), for at most 10 s.
func waitUntilHealthy(port: Int) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    try await TestClient.withClient(host: "localhost", port: port) { client in
        while ContinuousClock.now < deadline {
            if let response = try? await client.get("/health"), response.status == .ok { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("the service did not become healthy after the reload")
    }
}

extension Data {
    /// The bytes of 64 hexadecimal digits (the tests' keys).
    init(hex: String) {
        var bytes: [UInt8] = []
        var digits = hex.utf8.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) ?? 0)
        }
        self.init(bytes)
    }
}

/// A credentials directory as systemd makes one (0700, the credential 0400), holding `key` as notes-db-key.
func makeCredentialsDirectory(in directory: TestDirectory, key: String) throws -> String {
    let credentials = directory.path + "/credentials"
    guard mkdir(credentials, 0o700) == 0 else { throw POSIXError(.EIO) }
    try writeKeyFile(key, to: credentials + "/notes-db-key", mode: 0o400)
    return credentials
}
