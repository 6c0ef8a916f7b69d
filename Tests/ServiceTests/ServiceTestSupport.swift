import FMDB
import FMDBService
import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import XCTest

/// A service that runs `body` and returns: with `.gracefullyShutdownGroup`, its return (or its error) shuts
/// the group down gracefully, as a server's last request would.
struct Driver: Service {
    let body: @Sendable () async throws -> Void

    func run() async throws { try await body() }
}

/// The raw key made of `byte` 32 times, and its provider.
func rawKey(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }

func rawProvider(_ byte: UInt8) throws -> RawKeyProvider { try RawKeyProvider(key: rawKey(byte)) }

/// The key as 64 hexadecimal digits (what a key file holds).
func hexKey(_ byte: UInt8) -> String { String(repeating: String(format: "%02x", byte), count: 32) }

extension FMDBCipherTestCase {
    /// A keyed database `name` (key `byte`), by default with table `t` holding one row.
    @discardableResult
    func makeServiceDatabase(
        _ name: String = "app.db", key byte: UInt8,
        _ fill: (FMDatabase) throws -> Void = { db in
            try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            try db.execute("INSERT INTO t (v) VALUES ('first')")
        }
    ) throws -> String {
        try makeKeyedDatabase(name, provider: rawProvider(byte), fill)
    }

    /// Runs `service` in a `ServiceGroup` beside a driver running `body`; the driver's end shuts the group
    /// down gracefully. Returns when the group has stopped (the service's `run()` returned).
    func runGroup(
        _ service: FMDatabaseService, logger: Logger = Logger(label: "fmdb-service-test"),
        _ body: @escaping @Sendable () async throws -> Void
    ) async throws {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: service),
                    .init(
                        service: Driver(body: body), successTerminationBehavior: .gracefullyShutdownGroup,
                        failureTerminationBehavior: .gracefullyShutdownGroup),
                ],
                logger: logger))
        try await group.run()
    }
}

/// Writes a key file only its owner can read and write (`KeyMaterial.read` refuses one others can change).
func writeKeyFile(_ path: String, key byte: UInt8) throws {
    let created = FileManager.default.createFile(
        atPath: path, contents: Data((hexKey(byte) + "\n").utf8), attributes: [.posixPermissions: 0o600])
    XCTAssertTrue(created, "key file written")
}

/// Rekeys the file from `old` to `new` as another process would: a plain connection, which tells no queue
/// or pool of this process (only their own rekeys do).
func rekeyAsAnOperator(_ path: String, from old: UInt8, to new: UInt8) throws {
    let db = FMDatabase(path: path)
    guard db.open() else { throw db.lastError() }
    defer { db.close() }
    try db.setKey(using: rawProvider(old))
    try db.rekeySafely(using: rawProvider(new))
}

/// Waits (at most `seconds`) until `condition` holds; fails the test when it never does.
func eventually(
    _ what: String, seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line,
    _ condition: () -> Bool
) async {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline {
            XCTFail("timed out waiting: \(what)", file: file, line: line)
            return
        }
        try? await Task.sleep(for: .milliseconds(5))
    }
}

/// The SQLite result code of `error` (its primary code), or nil when it is not an `FMDatabaseError`.
func resultCode(_ error: any Error) -> Int32? { (error as? FMDatabaseError)?.resultCode }

/// Log lines with their metadata, for tests that check what the service logs and what it never logs.
struct MetadataLogCapture: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: [String: String]
    }

    private let lines = Locked<[Line]>([])

    var all: [Line] { lines.withLock { $0 } }

    func logger(label: String) -> Logger {
        Logger(label: label) { _ in Handler(capture: self) }
    }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let capture: MetadataLogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = metadata
            for (key, value) in event.metadata ?? [:] { all[key] = value }
            capture.append(
                Line(
                    level: event.level, message: "\(event.message)",
                    metadata: all.mapValues { "\($0)" }))
        }
    }
}
