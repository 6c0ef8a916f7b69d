import FMDB
import Foundation
import TestSupport
import XCTest

/// A signal at a terminal prompt (`KeyMaterial.read(from: .terminal(...))`) turns echo back on, then runs
/// the disposition the signal had before the prompt: a program's own handler (the tool's partial-output
/// cleanup is one) still runs.
final class TerminalPromptSignalTests: XCTestCase {
    /// SIGTERM while the helper waits at its prompt, on a pseudo-terminal script(1) makes: its own handler
    /// ran (exit 77) and saw echo already back on.
    func testASignalAtThePromptRestoresEchoThenRunsTheProgramsOwnHandler() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { throw XCTSkip("no script(1)") }
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        let echo = "stty -a | grep -o -- '-\\?echo ' | head -1"
        let shell = """
            '\(helper)' prompt-with-handler </dev/tty & p=$!
            for i in $(seq 600); do stty -a | grep -q -- '-echo ' && break; sleep 0.1; done
            echo "during: $(\(echo))"; kill -TERM $p; wait $p; echo "status: $?"; echo "after: $(\(echo))"
            """
        // script(1) forwards the end of its standard input to the terminal as an end of file, which would end
        // the prompt before the signal: its input is a pipe that stays open until it is done.
        let driver = """
            exec 3< <(sleep 600); /usr/bin/script -qec "$1" /dev/null <&3; status=$?; kill $! 2>/dev/null; exit $status
            """
        let result = try runProcess("/bin/bash", ["-c", driver, "bash", shell])
        let lines = result.stdout.replacingOccurrences(of: "\r", with: "")
        XCTAssertTrue(lines.contains("Key: "), lines)
        XCTAssertTrue(lines.contains("during: -echo"), lines)
        XCTAssertTrue(lines.contains("handler: echo on"), lines)
        XCTAssertTrue(lines.contains("status: 77"), lines)
        XCTAssertTrue(lines.contains("after: echo"), lines)
    }
}
