import FMDB
import Foundation
import XCTest

/// `--progress`: machine-readable progress lines on standard error when it is not a terminal.
final class ToolProgressTests: ToolTestCase {
    /// The `progress rekey PERCENT BYTES TOTAL RATE` lines of `stderr`, as numbers; fails on any other
    /// line that starts with "progress".
    private func progressLines(_ stderr: String) -> [[Int64]] {
        stderr.split(separator: "\n").filter { $0.hasPrefix("progress") }.compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 6, fields[1] == "rekey" else {
                XCTFail("not a progress line: \(line)")
                return nil
            }
            let numbers = fields[2...].compactMap { Int64($0) }
            XCTAssertEqual(numbers.count, 4, "four integers: \(line)")
            return numbers
        }
    }

    func testRekeyPrintsProgressLinesWhenAsked() throws {
        let enc = try makeEncrypted(rows: 2_000, payload: 1_000)
        let size = Int64(
            try XCTUnwrap(FileManager.default.attributesOfItem(atPath: enc)[.size] as? NSNumber).int64Value)
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let result = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N", "--progress"], env: env)
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = progressLines(result.stderr)
        XCTAssertGreaterThanOrEqual(lines.count, 2, result.stderr)
        XCTAssertEqual(lines.first?[0], 0, "a line when the rekey starts")
        XCTAssertEqual(lines.first?[2], size)
        XCTAssertEqual(lines.last?[0], 100, "a line at 100 when it is done")
        XCTAssertEqual(lines.last?[1], size, "all the bytes")
        XCTAssertEqual(lines.last?[2], size, "of the database's size")
        XCTAssertGreaterThan(lines.last?[3] ?? 0, 0, "a throughput")
        XCTAssertEqual(lines.map { $0[0] }, lines.map { $0[0] }.sorted(), "the percentage never goes back")
        XCTAssertEqual(rowCount(enc, rawKey: Self.otherRawKey), 2_000)
    }

    func testNoProgressLinesUnlessAskedAndNoneAt100WhenTheRekeyFails() throws {
        let enc = try makeEncrypted()
        let env = ["K": Self.rawKey, "N": Self.otherRawKey, "W": String(repeating: "77", count: 32)]
        let plain = try run(["rekey", enc, "--kdf", "raw", "--key-env", "K", "--new-key-env", "N"], env: env)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(progressLines(plain.stderr).count, 0, plain.stderr)
        let quiet = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "N", "--new-key-env", "K", "--progress", "--quiet"], env: env)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(progressLines(quiet.stderr).count, 0, "--quiet wins: \(quiet.stderr)")
        let wrong = try run(
            ["rekey", enc, "--kdf", "raw", "--key-env", "W", "--new-key-env", "N", "--progress"], env: env)
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
        XCTAssertFalse(progressLines(wrong.stderr).contains { $0[0] == 100 }, wrong.stderr)
    }
}
