import FMDB
import Foundation
import TestSupport
import XCTest

/// `FMPrivateFile`: a program's own output, made private (0600 whatever the umask, in a private directory) and
/// published atomically, never over something at DEST unless asked, never through a planted link.
final class PrivateFileTests: FMDBCipherTestCase {
    private func write(_ text: String, to output: FMPrivateFile) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: output.path))
    }

    func testCommitPublishesAPrivateFileAndLeavesNothingElse() throws {
        let old = umask(0o022)
        defer { umask(old) }
        let dest = path("rows.csv")
        let output = try FMPrivateFile(destination: dest)
        XCTAssertEqual(mode(output.path), 0o600)
        XCTAssertNotEqual(
            URL(fileURLWithPath: output.path).deletingLastPathComponent().path, directory.url.path,
            "written inside a private directory, not at DEST's side")
        try write("a,b\n", to: output)
        XCTAssertNil(mode(dest), "nothing at DEST before the commit")
        try output.commit()
        XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "a,b\n")
        XCTAssertEqual(mode(dest), 0o600)
        XCTAssertEqual(entries(), ["rows.csv"], "the private directory is gone")
        XCTAssertThrowsError(try output.commit(), "a second commit is a misuse")
    }

    func testSomethingAtTheDestinationIsRefusedUnlessReplacing() throws {
        let dest = path("rows.csv")
        try Data("keep".utf8).write(to: URL(fileURLWithPath: dest))
        XCTAssertThrowsError(try FMPrivateFile(destination: dest)) { error in
            XCTAssertEqual((error as? FMDatabaseError)?.copyFailure, .destinationExists)
        }
        XCTAssertEqual(entries(), ["rows.csv"])
        let output = try FMPrivateFile(destination: dest, replacingExisting: true)
        try write("new", to: output)
        try output.commit()
        XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "new")
    }

    func testAPlantedLinkAtTheDestinationIsReplacedNeverFollowed() throws {
        let target = path("victim")
        try Data("victim".utf8).write(to: URL(fileURLWithPath: target))
        let dest = path("rows.csv")
        XCTAssertEqual(symlink(target, dest), 0)
        XCTAssertThrowsError(try FMPrivateFile(destination: dest), "a dangling or live link is something there")
        let output = try FMPrivateFile(destination: dest, replacingExisting: true)
        try write("rows", to: output)
        try output.commit()
        XCTAssertFalse(isSymbolicLink(dest))
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "victim", "the link was not followed")
        XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "rows")
    }

    func testTheSourceIsNeverTheDestinationEvenWhenReplacing() throws {
        let source = path("app.db")
        try Data("db".utf8).write(to: URL(fileURLWithPath: source))
        XCTAssertThrowsError(try FMPrivateFile(destination: source, replacingExisting: true, source: source)) {
            XCTAssertEqual(($0 as? FMDatabaseError)?.copyFailure, .sameFile)
        }
        XCTAssertEqual(try String(contentsOfFile: source, encoding: .utf8), "db")
        // Nor its key slot file (by name, or by another name for the same file).
        let slots = source + "-keyslots"
        try Data("slots".utf8).write(to: URL(fileURLWithPath: slots))
        XCTAssertEqual(link(slots, path("alias")), 0)
        for destination in [slots, path("alias")] {
            XCTAssertThrowsError(
                try FMPrivateFile(destination: destination, replacingExisting: true, source: source), destination
            ) { XCTAssertEqual(($0 as? FMDatabaseError)?.copyFailure, .sameFile) }
        }
        XCTAssertEqual(try String(contentsOfFile: slots, encoding: .utf8), "slots")
    }

    /// A private directory the clean-up cannot remove after the commit (here it holds a file the clean-up does
    /// not know, as one it failed to remove would stay) does not undo the commit: the file is in place, and the
    /// error that says the directory is left names it; a clean commit says nothing.
    func testAPrivateDirectoryLeftAfterTheCommitIsNamedAndTheFileStaysInPlace() throws {
        let clean = try FMPrivateFile(destination: path("clean.csv"))
        try write("clean", to: clean)
        try clean.commit()
        XCTAssertNil(clean.stagingDirectoryNotRemoved)

        let dest = path("rows.csv")
        let output = try FMPrivateFile(destination: dest)
        let privateDirectory = URL(fileURLWithPath: output.path).deletingLastPathComponent().path
        try write("rows", to: output)
        try Data("stray".utf8).write(to: URL(fileURLWithPath: privateDirectory + "/stray"))
        try output.commit()
        XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "rows", "the commit stands")
        let left = try XCTUnwrap(output.stagingDirectoryNotRemoved, "the directory left is said")
        XCTAssertTrue(left.message.contains(privateDirectory), left.message)
        XCTAssertEqual(left.extendedCode, SQLITE_IOERR | (10 << 8), "SQLITE_IOERR_DELETE")
        XCTAssertTrue(FileManager.default.fileExists(atPath: privateDirectory))
    }

    func testDiscardAndReleaseLeaveNothing() throws {
        let output = try FMPrivateFile(destination: path("a.csv"))
        try write("partial", to: output)
        output.discard()
        XCTAssertEqual(entries(), [])
        do {
            let released = try FMPrivateFile(destination: path("b.csv"))
            try write("partial", to: released)
        }
        XCTAssertEqual(entries(), [], "an uncommitted file is removed when released")
    }
}
