import FMDB
import Foundation
import TestSupport
import XCTest

/// Shared set-up for the end-to-end tests of the `fmdb-cipher` binary: the base test case's private
/// directory and tool runner (under umask 022), the built tool's path, and databases made with the library.
class ToolTestCase: FMDBCipherTestCase {
    var tool: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        tool = try builtTool()
    }

    /// Runs the tool with `env` added to the environment, under umask 022 (see `runTool`).
    @discardableResult
    func run(_ arguments: [String], env: [String: String] = [:], input: String? = nil) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try runTool(arguments, env: env, input: input ?? "")
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
}
