import FMDB
import Foundation
import TestSupport
import XCTest

/// Every number option that ends up in SQLCipher's PRAGMA text is range-checked for the C int SQLCipher's
/// `atoi` reads it into (and page sizes for a power of two from 512 to 65536): out of range is a usage
/// error (64) naming the option, before any key is read or file written; the boundary values reach
/// SQLCipher as those numbers.
final class ToolNumberRangeTests: ToolTestCase {
    static let outOfRange = ["2147483648", "4294967297", "-1", "0", "9223372036854775807"]

    func testIterationCountsAndPageSizesOutsideTheirRangeAreUsageErrors() throws {
        let plain = try makePlaintext()
        let enc = try makeEncrypted()
        let dest = path("dest.db")
        let env = ["K": Self.rawKey, "NK": Self.otherRawKey]
        let raw = ["--kdf", "raw", "--key-env", "K", "--quiet"]
        for value in Self.outOfRange {
            let commands: [(String, [String])] = [
                ("--new-kdf-iter", ["encrypt", plain, dest] + raw + ["--new-kdf-iter=\(value)"]),
                ("--unsafe-new-kdf-iter", ["encrypt", plain, dest] + raw + ["--unsafe-new-kdf-iter=\(value)"]),
                ("--new-cipher-page-size", ["encrypt", plain, dest] + raw + ["--new-cipher-page-size=\(value)"]),
                ("--new-kdf-iter", ["export", enc, dest] + raw + ["--new-key-env", "NK", "--new-kdf-iter=\(value)"]),
                (
                    "--unsafe-new-kdf-iter",
                    ["export", enc, dest] + raw + ["--new-key-env", "NK", "--unsafe-new-kdf-iter=\(value)"]
                ),
                (
                    "--new-cipher-page-size",
                    ["export", enc, dest] + raw + ["--new-key-env", "NK", "--new-cipher-page-size=\(value)"]
                ),
                ("--kdf-iter", ["info", enc, "--json"] + raw + ["--kdf-iter=\(value)"]),
                ("--cipher-page-size", ["sql", enc, "SELECT 1"] + raw + ["--cipher-page-size=\(value)"]),
                ("--kdf-iter", ["decrypt", enc, dest] + raw + ["--kdf-iter=\(value)"]),
            ]
            for (option, arguments) in commands {
                let result = try run(arguments, env: env)
                XCTAssertEqual(result.status, 64, "\(arguments): \(result.stderr)")
                XCTAssertTrue(result.stderr.contains(option), "\(arguments): \(result.stderr)")
                XCTAssertFalse(FileManager.default.fileExists(atPath: dest), "\(arguments) wrote DEST")
            }
        }
        XCTAssertEqual(entries().filter { $0.hasPrefix(".dest.db") }, [], "no private directory left")
    }

    /// 2,147,483,647 iterations and 65,536-byte pages are accepted and are what SQLCipher uses: `info`
    /// reads them back with PRAGMA kdf_iter / cipher_page_size on the keyed connection. (A raw key runs no
    /// KDF, so the count costs nothing.)
    func testTheLargestAcceptedNumbersReachSQLCipherAsGiven() throws {
        let plain = try makePlaintext()
        let dest = path("max.db")
        let env = ["K": Self.rawKey, "NK": Self.otherRawKey]
        let written = try run(
            [
                "encrypt", plain, dest, "--kdf", "raw", "--key-env", "K", "--quiet",
                "--new-kdf-iter", "2147483647", "--new-cipher-page-size", "65536",
            ], env: env)
        XCTAssertEqual(written.status, 0, written.stderr)
        let info = try run(
            [
                "info", dest, "--json", "--kdf", "raw", "--key-env", "K",
                "--kdf-iter", "2147483647", "--cipher-page-size", "65536",
            ], env: env)
        XCTAssertEqual(info.status, 0, info.stderr)
        let details = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        // The count reaches the keyed connection (rowCountWith reads it back); `info` does not report it for a
        // raw key, which SQLCipher uses without its KDF: only the derivation the open went through is said.
        XCTAssertNil(details["kdf_iter"])
        XCTAssertEqual(details["cipher_page_size"] as? Int, 65_536)
        XCTAssertEqual(rowCountWith(dest, pageSize: 65_536, iterations: 2_147_483_647), 50)
        // export --new-… the same way.
        let copy = path("copy.db")
        let exported = try run(
            [
                "export", dest, copy, "--kdf", "raw", "--key-env", "K", "--kdf-iter", "2147483647",
                "--cipher-page-size", "65536", "--new-key-env", "K", "--new-kdf-iter", "2147483647",
                "--new-cipher-page-size", "65536", "--quiet",
            ], env: env)
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertEqual(rowCountWith(copy, pageSize: 65_536, iterations: 2_147_483_647), 50)
    }

    /// The rows of `t` when `file` opens with the raw key and these settings, which the keyed connection
    /// reports back as given (nil: it does not open).
    private func rowCountWith(_ file: String, pageSize: Int, iterations: Int) -> Int32? {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open() else { return nil }
        defer { db.close() }
        var hex = Self.rawKey
        let provider = hex.withUTF8 { try? RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) }
        guard let provider,
            (try? db.setKey(using: provider, settings: CipherSettings(pageSize: pageSize, kdfIterations: iterations)))
                != nil,
            db.string(forQuery: "PRAGMA kdf_iter") == String(iterations),
            db.string(forQuery: "PRAGMA cipher_page_size") == String(pageSize),
            let rs = db.executeQuery("select count(*) from t"), rs.next()
        else { return nil }
        return rs.int(forColumnIndex: 0)
    }
}
