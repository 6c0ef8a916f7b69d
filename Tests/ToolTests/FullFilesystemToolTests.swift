import FMDB
import Foundation
import TestSupport
import XCTest

/// The tool's exit codes on a real full disk and a real read-only filesystem (`SmallFilesystem`: root
/// only; CI runs as root). The library on them: `FileSystemFaultTests`.
final class FullFilesystemToolTests: ToolTestCase {
    var filesystem: SmallFilesystem?

    override func setUpWithError() throws {
        try super.setUpWithError()
        filesystem = try SmallFilesystem()
    }

    override func tearDown() {
        filesystem?.unmount()
        super.tearDown()
    }

    func testToolExitCodesOnAReadOnlyAndAFullFilesystem() throws {
        let point = try XCTUnwrap(filesystem).path
        let keys = ["K": "k", "N": "n"]
        // A source too big for the 256 KiB filesystem: encrypting it there fills the disk.
        let outside = try TemporaryDirectory("fmdb-full-src")
        let source = outside.path("big.db")
        let big = FMDatabase(path: source)
        XCTAssertTrue(big.open())
        XCTAssertTrue(big.executeUpdate("create table t (pad blob)"))
        XCTAssertTrue(
            big.executeStatements(
                "with recursive c(x) as (select 1 union all select x + 1 from c limit 400) insert into t select "
                    + "randomblob(2000) from c"
            ))
        big.close()
        let full = try run(["encrypt", source, point + "/big-enc.db", "--key-env", "K", "--quiet"], env: keys)
        XCTAssertEqual(full.status, 74, "disk full is exit 74: \(full.stderr)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: point)
        XCTAssertEqual(leftovers, [], "no half file and no temporary file left on the full disk")

        let small = point + "/small.db"
        XCTAssertEqual(
            try run(
                ["sql", small, "create table t (a); insert into t values (1)", "--key-env", "K", "--create"], env: keys
            )
            .status, 0)
        XCTAssertTrue(try XCTUnwrap(filesystem).remountReadOnly())
        let readOnly = try run(["rekey", small, "--key-env", "K", "--new-key-env", "N", "--quiet"], env: keys)
        XCTAssertEqual(readOnly.status, 74, "a read-only filesystem is exit 74: \(readOnly.stderr)")
        let check = try run(["check", small, "--key-env", "K"], env: keys)
        XCTAssertEqual(check.status, 0, "still opens with the old key: \(check.stderr)")
    }
}
