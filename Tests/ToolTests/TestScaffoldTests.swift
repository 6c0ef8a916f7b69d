import FMDB
import Foundation
import TestSupport
import XCTest

/// The base test case keeps its promises: a directory per test, removed after it, and the tool run under
/// umask 022 whatever the umask of the test runner (a 0600 check must not depend on it).
final class TestScaffoldTests: ToolTestCase {
    func testEachTestHasItsOwnDirectoryRemovedAfterIt() throws {
        let folder = directory.url.path
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder))
        try Data("x".utf8).write(to: URL(fileURLWithPath: path("file")))
        tearDown()
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder), "removed when the test ends")
    }

    func testTheToolRunsUnderUmask022WhateverTheRunnersUmask() throws {
        let previous = umask(0o077)
        defer { umask(previous) }
        // `umask` prints the mask the tool starts with, then execs it.
        let shown = try runTool(["--version"], wrapper: ["/bin/sh", "-c", "umask >&2; exec \"$@\"", "sh"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertEqual(shown.stderr.split(separator: "\n").first, "0022")
        let limited = try runTool(["--version"], wrapper: ["/usr/bin/timeout", "20", "/bin/sh", "-c", "umask; :"])
        XCTAssertEqual(limited.stdout, "0022\n", "the wrapper runs under the same umask")
    }

    func testStandardOutputCanGoToAFile() throws {
        let output = path("version.txt")
        let result = try runTool(["--version"], standardOutput: output)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stdout, "")
        XCTAssertTrue(try String(contentsOfFile: output, encoding: .utf8).contains("fmdb-cipher"))
    }

    /// The tests run the binary users install when the environment names it (`Scripts/test` names the one
    /// `Scripts/install` built): that one, never a fallback; else the debug build beside the tests.
    func testTheToolUnderTestIsTheNamedInstalledBinary() throws {
        let tool = try builtTool()
        if let named = ProcessInfo.processInfo.environment["FMDB_CIPHER_TOOL"], !named.isEmpty {
            XCTAssertEqual(tool, named)
            let linked = try runProcess("/usr/bin/ldd", [tool])
            XCTAssertFalse(linked.stdout.contains("libswiftCore"), "installed with the Swift runtime linked statically")
        } else {
            XCTAssertEqual(tool, builtProduct("fmdb-cipher"))
        }
        let version = try runTool(["--version"])
        XCTAssertEqual(version.status, 0, version.stderr)
    }
}
