import FMDB
import FMDBService
import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import XCTest

/// Key reloads (explicit and on SIGHUP) after an operator's rekey, and the health check.
final class ServiceKeyReloadTests: FMDBCipherTestCase {
    /// A service on `keyFile` that reads it only at start and at a reload (the pool does not read it again
    /// by itself at a key change), so that only a reload can pick up an operator's rekey.
    private func keyFileService(
        _ path: String, keyFile: String, reloadsKeyOnSIGHUP: Bool = false
    ) -> FMDatabaseService {
        FMDatabaseService(
            path: path, keyFile: keyFile, holding: .rawKey,
            options: FMDatabaseServiceOptions(
                reloadsKeyOnSIGHUP: reloadsKeyOnSIGHUP, readsKeySourceOnKeyChange: false))
    }

    func testByDefaultThePoolReadsTheKeyFileAgainAtAKeyChange() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let service = FMDatabaseService(
            path: path, keyFile: keyFile, holding: .rawKey,
            options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false))
        try await runGroup(service) {
            _ = try await service.checkHealth()
            try writeKeyFile(keyFile, key: 2)  // The operator's order: the new key first, then the rekey.
            try rekeyAsAnOperator(path, from: 1, to: 2)
            try await Task.sleep(for: .milliseconds(2))  // Past the key check interval.
            let health = try await service.checkHealth()
            XCTAssertGreaterThanOrEqual(health.schemaObjects, 1, "the pool read the new key by itself")
            XCTAssertEqual(service.statistics.reloadsSucceeded, 0, "without a reload")
            XCTAssertGreaterThanOrEqual(service.statistics.pool.keyChangesSeen, 1)
        }
    }

    func testReloadHandsThePoolTheKeyAnOperatorRekeyedTo() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let service = keyFileService(path, keyFile: keyFile)
        try await runGroup(service) {
            _ = try await service.checkHealth()
            try writeKeyFile(keyFile, key: 2)
            try rekeyAsAnOperator(path, from: 1, to: 2)
            do {
                _ = try await service.checkHealth()
                XCTFail("the health check passed under a key the service does not hold")
            } catch {
                XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "\(error)")
            }
            try await service.reloadKey()
            let health = try await service.checkHealth()
            XCTAssertGreaterThanOrEqual(health.schemaObjects, 1)
            try await service.performTransaction { db in try db.execute("INSERT INTO t (v) VALUES ('after')") }
            XCTAssertEqual(service.statistics.reloadsSucceeded, 1)
            XCTAssertEqual(service.statistics.reloadsFailed, 0)
        }
        let rows = try FMDatabaseQueue(path: path, keyProvider: rawProvider(2)).inDatabase { db in
            db.int(forQuery: "SELECT count(*) FROM t")
        }
        XCTAssertEqual(rows, 2, "the write after the reload is in the file, under the new key")
    }

    func testAFailedReloadKeepsTheOldKey() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let service = keyFileService(path, keyFile: keyFile)
        try await runGroup(service) {
            _ = try await service.checkHealth()  // Open before the key file changes.
            try writeKeyFile(keyFile, key: 3)  // A key that does not open the file.
            do {
                try await service.reloadKey()
                XCTFail("a key that does not open the database was taken")
            } catch {
                XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "\(error)")
            }
            try FileManager.default.removeItem(atPath: keyFile)  // A key source that cannot be read.
            do {
                try await service.reloadKey()
                XCTFail("a reload without its key file succeeded")
            } catch {
                XCTAssertEqual(resultCode(error), SQLITE_CANTOPEN, "\(error)")
            }
            let health = try await service.checkHealth()
            XCTAssertGreaterThanOrEqual(health.schemaObjects, 1, "the service still serves with the old key")
            try await service.performTransaction { db in try db.execute("INSERT INTO t (v) VALUES ('kept')") }
            XCTAssertEqual(service.statistics.reloadsFailed, 2)
            XCTAssertEqual(service.statistics.reloadsSucceeded, 0)
        }
    }

    func testSIGHUPReloadsTheKey() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let service = keyFileService(path, keyFile: keyFile, reloadsKeyOnSIGHUP: true)
        try await runGroup(service) {
            // The service serves: its SIGHUP handler was installed before the pool opened.
            _ = try await service.checkHealth()
            try writeKeyFile(keyFile, key: 2)
            try rekeyAsAnOperator(path, from: 1, to: 2)
            XCTAssertEqual(kill(getpid(), SIGHUP), 0)
            await eventually("the SIGHUP reload") { service.statistics.reloadsSucceeded == 1 }
            let health = try await service.checkHealth()
            XCTAssertGreaterThanOrEqual(health.schemaObjects, 1, "the reloaded key opens the rekeyed file")
        }
    }

    func testHealthCheckFailsAfterARekeyUnderAFixedKey() async throws {
        let path = try makeServiceDatabase(key: 1)
        let service = FMDatabaseService(
            path: path, options: FMDatabaseServiceOptions(reloadsKeyOnSIGHUP: false)
        ) { try rawProvider(1) }
        try await runGroup(service) {
            let before = try await service.checkHealth()
            XCTAssertEqual(before.schemaObjects, 1, "one table")
            try rekeyAsAnOperator(path, from: 1, to: 4)
            do {
                _ = try await service.checkHealth()
                XCTFail("the health check passed after the file was rekeyed")
            } catch {
                XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "\(error)")
            }
            do {
                _ = try await service.checkHealth()
                XCTFail("the health check passed on a second try")
            } catch {
                XCTAssertEqual(resultCode(error), SQLITE_NOTADB, "a fixed key keeps failing: \(error)")
            }
        }
    }
}

/// SIGHUP when the key source fails: the service keeps serving with the key it has.
final class ServiceSignalFailureTests: FMDBCipherTestCase {
    func testAFailedSIGHUPReloadKeepsServing() async throws {
        let path = try makeServiceDatabase(key: 1)
        let keyFile = self.path("db.key")
        try writeKeyFile(keyFile, key: 1)
        let service = FMDatabaseService(path: path, keyFile: keyFile, holding: .rawKey)  // SIGHUP on by default.
        try await runGroup(service) {
            _ = try await service.checkHealth()
            try writeKeyFile(keyFile, key: 6)  // Not the file's key.
            XCTAssertEqual(kill(getpid(), SIGHUP), 0)
            await eventually("the failed SIGHUP reload is counted") { service.statistics.reloadsFailed == 1 }
            XCTAssertEqual(service.statistics.reloadsSucceeded, 0)
            let health = try await service.checkHealth()
            XCTAssertGreaterThanOrEqual(health.schemaObjects, 1, "the old key still serves")
        }
    }
}
