import FMDB
import Foundation
import TestSupport
import XCTest

/// The tool judges its input files with the library's `FMDatabase.inspectFile(atPath:)`.
final class InputFileTests: ToolTestCase {
    func testAFIFOIsRefusedAtOnceWithExit66() throws {
        let fifo = path("db.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        for command in [
            ["info", fifo], ["check", fifo, "--key-env", "K"], ["rekey", fifo, "--key-env", "K", "--new-key-env", "N"],
        ] {
            let result = try run(command, env: ["K": "k", "N": "n"])
            XCTAssertEqual(result.status, 66, "\(command[0]): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("not a regular file"), result.stderr)
        }
    }
}
