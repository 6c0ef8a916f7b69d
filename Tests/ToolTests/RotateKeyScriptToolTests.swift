import Foundation
import TestSupport
import XCTest

/// Scripts/rotate-key after a failed rekey: what it says follows `check`'s exit code for each key (0 opens,
/// 65 or 2 does not, anything else could not check), never any non-zero exit taken for "does not open".
final class RotateKeyScriptToolTests: ToolTestCase {
    /// The script run against a stand-in fmdb-cipher: its rekey exits 74 (writing the backup when `backup` is
    /// set); its check with the old key exits 0 the first time (the script's first step), then `old`; with the
    /// new key, `new`.
    func rotate(old: Int, new: Int, backup: Bool) throws -> (status: Int32, stderr: String) {
        let stub = path("stub-\(old)-\(new)-\(backup)")
        let state = stub + ".checked"
        let text = """
            #!/bin/bash
            key= backup= previous=
            for argument; do
                [ "$previous" = --key-env ] && key=$argument
                [ "$previous" = --backup ] && backup=$argument
                previous=$argument
            done
            case $1 in
            rekey) \(backup ? "[ -n \"$backup\" ] && : > \"$backup\"" : ":"); exit 74 ;;
            check)
                if [ "$key" = OLD_DB_KEY ]; then
                    [ -e \(state) ] || { : > \(state); exit 0; }
                    exit \(old)
                fi
                exit \(new) ;;
            esac
            exit 1
            """
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: stub, contents: Data(text.utf8), attributes: [.posixPermissions: 0o700]))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/rotate-key").path
        var environment = ProcessInfo.processInfo.environment
        environment["FMDB_CIPHER"] = stub
        environment["OLD_DB_KEY"] = "old"
        environment["NEW_DB_KEY"] = "new"
        let database = path("app-\(old)-\(new)-\(backup).db")
        let result = try runProcess("/bin/bash", [script, database], environment: environment)
        return (result.status, result.stderr)
    }

    func testACheckThatCouldNotRunIsNeverNeitherKey() throws {
        for (old, new) in [(75, 75), (74, 65), (65, 75)] {
            let result = try rotate(old: old, new: new, backup: true)
            XCTAssertEqual(result.status, 74, result.stderr)
            XCTAssertFalse(result.stderr.contains("restore"), "old \(old), new \(new): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("could not be checked"), "old \(old), new \(new): \(result.stderr)")
        }
    }

    func testRestoreIsSaidOnlyWhenNeitherKeyOpensAndTheBackupExists() throws {
        let kept = try rotate(old: 65, new: 2, backup: true)
        XCTAssertTrue(kept.stderr.contains("opens with neither key: restore it from"), kept.stderr)
        let none = try rotate(old: 2, new: 65, backup: false)
        XCTAssertFalse(none.stderr.contains("restore"), none.stderr)
        XCTAssertTrue(none.stderr.contains("no backup"), none.stderr)
    }
}
