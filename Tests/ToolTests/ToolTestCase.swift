import FMDB
import Foundation
import TestSupport
import XCTest

/// Shared set-up for the end-to-end tests of the `fmdb-cipher` binary: a private directory, the built
/// tool, and databases made with the library.
class ToolTestCase: XCTestCase {
    var directory: TemporaryDirectory!
    var tool: String!

    override func setUpWithError() throws {
        directory = try TemporaryDirectory("fmdb-tool")
        tool = try XCTUnwrap(builtProduct("fmdb-cipher"), "build the fmdb-cipher product first")
    }

    override func tearDown() {
        directory = nil
    }

    func path(_ name: String) -> String { directory.path(name) }

    /// Runs the tool with `env` added to the environment, under umask 022 (the common default, under which
    /// a careless create makes world-readable files).
    @discardableResult
    func run(_ arguments: [String], env: [String: String] = [:], input: String? = nil) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(env) { _, new in new }
        return try runProcess(
            "/bin/sh", ["-c", "umask 022; exec \"$0\" \"$@\"", tool] + arguments, input: input ?? "",
            environment: environment)
    }

    /// A plaintext database with a table `t` of `rows` rows of `payload` random bytes each.
    func makePlaintext(_ name: String = "plain.db", rows: Int = 50, payload: Int = 10) throws -> String {
        let file = path(name)
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text, b blob)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<rows {
            XCTAssertTrue(db.executeUpdate("insert into t (v, b) values (?, randomblob(?))", "MARKER-\(i)", payload))
        }
        XCTAssertTrue(db.commit())
        db.close()
        return file
    }

    /// An encrypted copy of a fresh plaintext database, made by the tool with `--kdf raw` (no KDF cost).
    func makeEncrypted(_ name: String = "enc.db", rows: Int = 50, payload: Int = 10) throws -> String {
        let plain = try makePlaintext("src-\(name)", rows: rows, payload: payload)
        let result = try run(
            ["encrypt", plain, path(name), "--kdf", "raw", "--key-env", "K", "--quiet"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        return path(name)
    }

    static let rawKey = String(repeating: "5a", count: 32)
    static let otherRawKey = String(repeating: "c3", count: 32)

    /// The permission bits of `path` (lstat: a link's own).
    func mode(_ path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    func isSymbolicLink(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK
    }

    /// The rows of `t` when `file` opens with the raw key (nil: it does not).
    func rowCount(_ file: String, rawKey: String?) -> Int32? {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open() else { return nil }
        defer { db.close() }
        if let rawKey {
            var hex = rawKey
            let provider = hex.withUTF8 {
                try? RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0)))
            }
            guard let provider, (try? db.setKey(using: provider)) != nil else { return nil }
        }
        guard let rs = db.executeQuery("select count(*) from t"), rs.next() else { return nil }
        return rs.int(forColumnIndex: 0)
    }

    /// Names in the test directory (hidden ones included).
    func entries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? []).sorted()
    }
}
