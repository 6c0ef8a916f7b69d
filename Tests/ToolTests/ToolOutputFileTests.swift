import FMDB
import Foundation
import TestSupport
import XCTest

/// Every file the tool writes is private (0600, or the source's stricter mode) whatever the umask, is made
/// in a private directory, never follows a planted link, and replaces nothing without --force.
final class ToolOutputFileTests: ToolTestCase {
    func testEveryOutputIs0600UnderUmask022() throws {
        let enc = try makeEncrypted()
        let plain = try makePlaintext("p.db")
        let env = ["K": Self.rawKey, "N": Self.otherRawKey]
        let raw = ["--kdf", "raw", "--key-env", "K"]
        let runs: [(String, [String])] = [
            ("encrypted.db", ["encrypt", plain, path("encrypted.db")] + raw),
            ("decrypted.db", ["decrypt", enc, path("decrypted.db")] + raw),
            ("exported.db", ["export", enc, path("exported.db"), "--new-key-env", "N"] + raw),
            ("backup.db", ["rekey", enc, "--new-key-env", "N", "--backup", path("backup.db")] + raw),
            (
                "created-by-sql.db",
                ["sql", path("created-by-sql.db"), "create table x (a); insert into x values (1)", "--create"] + raw
            ),
        ]
        for (output, arguments) in runs {
            let result = try run(arguments + (arguments[0] == "sql" ? [] : ["--quiet"]), env: env)
            XCTAssertEqual(result.status, 0, "\(arguments[0]): \(result.stderr)")
            XCTAssertEqual(mode(path(output)), 0o600, "\(arguments[0]) writes \(output) as 0600 under umask 022")
        }
        XCTAssertEqual(rowCount(path("decrypted.db"), rawKey: nil), 50)
        XCTAssertEqual(entries().filter { $0.hasPrefix(".") }, [], "no private directory left behind")
    }

    func testTheSourcesModeWinsWhenItIsStricter() throws {
        let plain = try makePlaintext()
        XCTAssertEqual(chmod(plain, 0o400), 0)
        let result = try run(
            ["encrypt", plain, path("strict.db"), "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(mode(path("strict.db")), 0o400)
    }

    func testADanglingSymlinkAtDestIsRefusedAndNeverFollowed() throws {
        let plain = try makePlaintext()
        let target = path("target-of-link.db")
        XCTAssertEqual(symlink(target, path("dest.db")), 0)
        var result = try run(
            ["encrypt", plain, path("dest.db"), "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 73, result.stderr)
        XCTAssertTrue(result.stderr.contains("--force"), result.stderr)
        XCTAssertTrue(isSymbolicLink(path("dest.db")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), "the link is not followed")
        // `sql` creating a database does not follow it either.
        result = try run(
            ["sql", path("dest.db"), "create table x (a)", "--kdf", "raw", "--key-env", "K", "--create"],
            env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 73, result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), "sql does not create through the link")
        // --force replaces the link itself, and still writes nothing where it pointed.
        result = try run(
            ["encrypt", plain, path("dest.db"), "--kdf", "raw", "--key-env", "K", "--force"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(isSymbolicLink(path("dest.db")))
        XCTAssertEqual(rowCount(path("dest.db"), rawKey: Self.rawKey), 50)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target))
    }

    func testPlantedLinksBesideDestAreNotFollowed() throws {
        let plain = try makePlaintext()
        let victim = path("victim.txt")
        try Data("do not touch".utf8).write(to: URL(fileURLWithPath: victim))
        for name in ["out.db-journal", "out.db-wal", "out.db-shm", "out.db.tmp", ".out.db.tmp", "sql.db-journal"] {
            XCTAssertEqual(symlink(victim, path(name)), 0, name)
        }
        var result = try run(
            ["encrypt", plain, path("out.db"), "--kdf", "raw", "--key-env", "K"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        result = try run(
            [
                "sql", path("sql.db"), "create table x (a); insert into x values (1)", "--kdf", "raw", "--key-env", "K",
                "--create",
            ],
            env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "do not touch")
        XCTAssertEqual(mode(victim), 0o644 & ~0o022, "the victim's mode is unchanged")
    }

    /// A copy big enough to watch: the private directory is 0700, the new file 0600, another user cannot plant
    /// a link in it, and a DEST created while the copy runs is not replaced.
    func testPrivateDirectoryWhileCopyingAndADestThatAppearsMeanwhileIsKept() throws {
        let plain = try makePlaintext(rows: 20_000, payload: 1000)
        let dest = path("late.db")
        var environment = ProcessInfo.processInfo.environment
        environment["K"] = Self.rawKey
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c", "umask 022; exec \"$0\" \"$@\"", tool, "encrypt", plain, dest, "--kdf", "raw", "--key-env", "K",
            "--quiet",
        ]
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        var privateDirectory: String?
        let deadline = Date().addingTimeInterval(20)
        while privateDirectory == nil, process.isRunning, Date() < deadline {
            privateDirectory = entries().first { $0.hasPrefix(".late.db.fmdb-cipher-") }.map(path)
            if privateDirectory == nil { usleep(2_000) }
        }
        let folder = try XCTUnwrap(privateDirectory, "the copy works in a private directory beside DEST")
        XCTAssertEqual(mode(folder), 0o700)
        let inside = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        for name in inside { XCTAssertEqual(mode(folder + "/" + name), 0o600, name) }
        if getuid() == 0 {
            // Another user (nobody) cannot plant a link where SQLite will put the journal.
            let attempt = try runProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                    "/bin/ln", "-s", "/etc/passwd", folder + "/new.db-journal",
                ])
            XCTAssertNotEqual(attempt.status, 0, "another user cannot write into the private directory")
        }
        try Data("appeared meanwhile".utf8).write(to: URL(fileURLWithPath: dest))
        process.waitUntilExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, 73, stderr)
        XCTAssertTrue(stderr.contains("appeared"), stderr)
        XCTAssertEqual(try String(contentsOfFile: dest, encoding: .utf8), "appeared meanwhile", "not replaced")
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder), "the private directory is removed")
    }

    /// The documented recipe for library-created databases: create the file 0600 first; SQLite keeps its mode
    /// and gives the journal, WAL and shared-memory files the same.
    func testLibraryRecipeForPrivateDatabaseFiles() throws {
        let file = path("app.db")
        let previous = umask(0o022)
        defer { umask(previous) }
        XCTAssertTrue(
            FileManager.default.createFile(atPath: file, contents: nil, attributes: [.posixPermissions: 0o600]))
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        try db.setKey(using: PassphraseKeyProvider("recipe"))
        XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = WAL"), "wal")
        XCTAssertTrue(db.executeUpdate("create table t (a)"))
        XCTAssertTrue(db.executeUpdate("insert into t values (1)"))
        for suffix in ["", "-wal", "-shm"] { XCTAssertEqual(mode(file + suffix), 0o600, "app.db\(suffix)") }
        db.close()
        // Without it, SQLite creates the file 0644 minus the umask: world-readable under umask 022.
        let other = FMDatabase(path: path("default.db"))
        XCTAssertTrue(other.open())
        XCTAssertTrue(other.executeUpdate("create table t (a)"))
        other.close()
        XCTAssertEqual(mode(path("default.db")), 0o644)
    }

    func testKeysExportRawOutputIsAPrivateFileThatFollowsNoLink() throws {
        let db = path("slotted.db")
        let env = ["K": "an administrator's passphrase"]
        XCTAssertEqual(try run(["keys", "init", db, "--key-env", "K"], env: env).status, 0)
        let confirm = "--i-understand-this-reveals-the-data-key"
        let shown = try run(["keys", "export-raw", db, "--key-env", "K", confirm], env: env)
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let key = shown.stdout
        XCTAssertEqual(key.count, 65, "64 hex digits and a newline")

        let file = path("data.key")
        let written = try run(["keys", "export-raw", db, "--key-env", "K", confirm, "--output", file], env: env)
        XCTAssertEqual(written.status, 0, written.stderr)
        XCTAssertEqual(written.stdout, "", "nothing on standard output")
        XCTAssertEqual(mode(file), 0o600, "0600 under umask 022")
        XCTAssertEqual(try String(contentsOfFile: file, encoding: .utf8), key)
        XCTAssertEqual(entries().filter { $0.hasPrefix(".") }, [], "no private directory left behind")

        // An existing FILE is refused unless --force; a planted link there is replaced, never followed.
        let again = try run(["keys", "export-raw", db, "--key-env", "K", confirm, "--output", file], env: env)
        XCTAssertEqual(again.status, 73, again.stderr)
        let target = path("elsewhere")
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data("keep".utf8)))
        let link = path("link.key")
        XCTAssertEqual(symlink(target, link), 0)
        let noForce = try run(["keys", "export-raw", db, "--key-env", "K", confirm, "--output", link], env: env)
        XCTAssertEqual(noForce.status, 73, noForce.stderr)
        let forced = try run(
            ["keys", "export-raw", db, "--key-env", "K", confirm, "--output", link, "--force"], env: env)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertFalse(isSymbolicLink(link))
        XCTAssertEqual(mode(link), 0o600)
        XCTAssertEqual(try String(contentsOfFile: link, encoding: .utf8), key)
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "keep", "the link was not followed")
        // Never the database's own files; a wrong key leaves no FILE.
        let own = try run(
            ["keys", "export-raw", db, "--key-env", "K", confirm, "--output", db + "-keyslots", "--force"], env: env)
        XCTAssertEqual(own.status, 64, own.stderr)
        let wrong = try run(
            ["keys", "export-raw", db, "--key-env", "K", confirm, "--output", path("wrong.key")],
            env: ["K": "not the passphrase"])
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
        XCTAssertNil(mode(path("wrong.key")))
        let forceAlone = try run(["keys", "export-raw", db, "--key-env", "K", confirm, "--force"], env: env)
        XCTAssertEqual(forceAlone.status, 64, forceAlone.stderr)
    }
}
