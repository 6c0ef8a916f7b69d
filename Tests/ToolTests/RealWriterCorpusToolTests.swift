import FMDB
import Foundation
import TestSupport
import XCTest

/// A corpus of files written by a program nobody here wrote — the `sqlcipher` shell of the linked SQLCipher's
/// line (FMDB_SQLCIPHER3_SHELL on 3.x, FMDB_SQLCIPHER4_SHELL on 4.x) — with each setting an app may choose,
/// a WAL left by a crashed writer, an attached database, full-text tables and large rows. Each file is read
/// by the tool with the flags that describe it, rekeyed by the tool, and opened again by the shell that
/// wrote it with the new key and the same settings.
final class RealWriterCorpusToolTests: ToolTestCase {
    struct Entry {
        let name: String
        /// The shell's statements after `PRAGMA key`: the settings the app chose.
        let pragmas: [String]
        /// The tool's flags for the same settings.
        let flags: [String]
        var raw = false
        var body = "CREATE TABLE t (a, b);\nINSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three');\n"
        var rows = 3
    }

    let saltHex = "f0e1d2c3b4a5968778695a4b3c2d1e0f"
    let rawOld = String(repeating: "7e", count: 32)
    let rawNew = String(repeating: "8f", count: 32)

    /// The linked line's shell, which writes files the linked SQLCipher reads.
    func linkedShell() throws -> String {
        let variable = CipherFormat.v4.isSupportedByLinkedSQLCipher ? "FMDB_SQLCIPHER4_SHELL" : "FMDB_SQLCIPHER3_SHELL"
        guard let shell = ProcessInfo.processInfo.environment[variable],
            FileManager.default.isExecutableFile(atPath: shell)
        else { throw XCTSkip("\(variable) (the linked line's sqlcipher shell) is not set") }
        return shell
    }

    var corpus: [Entry] {
        let fts = CipherFormat.v4.isSupportedByLinkedSQLCipher ? "fts5" : "fts4"
        var entries = [
            Entry(name: "defaults", pragmas: [], flags: []),
            Entry(name: "hmac-off", pragmas: ["PRAGMA cipher_use_hmac = OFF;"], flags: ["--cipher-use-hmac", "off"]),
            Entry(
                name: "page-size-kdf-iter", pragmas: ["PRAGMA cipher_page_size = 8192;", "PRAGMA kdf_iter = 100000;"],
                flags: ["--cipher-page-size", "8192", "--kdf-iter", "100000"]),
            Entry(
                name: "full-text", pragmas: [], flags: [],
                body: "CREATE VIRTUAL TABLE t USING \(fts)(a, b);\nINSERT INTO t VALUES ('sqlcipher shell', 'x'), "
                    + "('full text', 'y');\nCREATE VIRTUAL TABLE f4 USING fts4(c);\nINSERT INTO f4 VALUES ('four');\n",
                rows: 2),
            Entry(
                name: "large-rows", pragmas: [], flags: [],
                body: "CREATE TABLE t (a, b);\nINSERT INTO t VALUES (1, randomblob(300000)), (2, zeroblob(70000)), "
                    + "(3, hex(randomblob(50000)));\n"),
        ]
        if CipherFormat.v4.isSupportedByLinkedSQLCipher {
            entries += [
                Entry(
                    name: "ios-shared-container",
                    pragmas: ["PRAGMA cipher_plaintext_header_size = 32;", "PRAGMA cipher_salt = \"x'\(saltHex)'\";"],
                    flags: ["--cipher-plaintext-header-size", "32", "--cipher-salt", saltHex], raw: true),
                Entry(
                    name: "sha256-algorithms",
                    pragmas: [
                        "PRAGMA cipher_hmac_algorithm = HMAC_SHA256;",
                        "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA256;",
                    ],
                    flags: ["--cipher-hmac-algorithm", "HMAC_SHA256", "--cipher-kdf-algorithm", "PBKDF2_HMAC_SHA256"]),
                Entry(
                    name: "sha1-algorithms",
                    pragmas: [
                        "PRAGMA cipher_hmac_algorithm = HMAC_SHA1;", "PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA1;",
                    ],
                    flags: ["--cipher-hmac-algorithm", "HMAC_SHA1", "--cipher-kdf-algorithm", "PBKDF2_HMAC_SHA1"]),
                Entry(
                    name: "v3-hmac-off",
                    pragmas: ["PRAGMA cipher_compatibility = 3;", "PRAGMA cipher_use_hmac = OFF;"],
                    flags: ["--cipher-use-hmac", "off"]),
            ]
        }
        return entries
    }

    func keying(_ entry: Entry, old: Bool) -> String {
        let key =
            entry.raw
            ? "PRAGMA key = \"x'\(old ? rawOld : rawNew)'\";" : "PRAGMA key = '\(old ? "old app key" : "new app key")';"
        return ([key] + entry.pragmas).joined(separator: "\n") + "\n"
    }

    func keys(_ entry: Entry) -> (flags: [String], env: [String: String]) {
        (
            ["--key-env", "K"] + (entry.raw ? ["--kdf", "raw"] : []) + entry.flags,
            entry.raw ? ["K": rawOld, "N": rawNew] : ["K": "old app key", "N": "new app key"]
        )
    }

    func lastLine(_ text: String) -> String {
        text.split(separator: "\n").last.map(String.init) ?? ""
    }

    /// Read by the tool, rekeyed by the tool, reopened by the shell with the new key.
    func roundTrip(_ entry: Entry, file: String, shell: String) throws {
        let (flags, env) = keys(entry)
        let read = try run(["sql", file, "SELECT count(*) FROM t", "--csv", "--read-only"] + flags, env: env)
        XCTAssertEqual(read.status, 0, "\(entry.name): \(read.stderr)")
        XCTAssertEqual(lastLine(read.stdout), String(entry.rows), "\(entry.name): \(read.stdout)")
        let info = try run(["info", file, "--json"] + flags, env: env)
        XCTAssertEqual(info.status, 0, "\(entry.name): \(info.stderr)")
        let check = try run(["check", file] + flags, env: env)
        XCTAssertEqual(check.status, 0, "\(entry.name): \(check.stderr)")
        let rekeyed = try run(["rekey", file, "--new-key-env", "N", "--quiet"] + flags, env: env)
        XCTAssertEqual(rekeyed.status, 0, "\(entry.name): \(rekeyed.stderr)")
        let reopened = try runSQLCipherShell(shell, file, keying(entry, old: false) + "SELECT count(*) FROM t;\n")
        XCTAssertEqual(lastLine(reopened.stdout), String(entry.rows), "\(entry.name): \(reopened.stderr)")
    }

    func testEachSettingRoundTripsThroughTheWriter() throws {
        let shell = try linkedShell()
        for entry in corpus {
            let file = path("\(entry.name).db")
            let made = try runSQLCipherShell(shell, file, keying(entry, old: true) + entry.body)
            XCTAssertEqual(made.status, 0, "\(entry.name): \(made.stderr)")
            try roundTrip(entry, file: file, shell: shell)
        }
    }

    /// An app's attached database (ATTACH … KEY) is a file of its own: each opens with its key.
    func testAnAttachedDatabaseRoundTrips() throws {
        let shell = try linkedShell()
        let main = path("main.db")
        let other = path("attached.db")
        let made = try runSQLCipherShell(
            shell, main,
            "PRAGMA key = 'old app key';\nCREATE TABLE t (a);\nINSERT INTO t VALUES (1);\n"
                + "ATTACH DATABASE '\(other)' AS o KEY 'old app key';\nCREATE TABLE o.t (a);\n"
                + "INSERT INTO o.t VALUES (1), (2);\nSELECT count(*) FROM o.t;\n")
        XCTAssertEqual(lastLine(made.stdout), "2", made.stderr)
        try roundTrip(Entry(name: "main", pragmas: [], flags: [], rows: 1), file: main, shell: shell)
        try roundTrip(Entry(name: "attached", pragmas: [], flags: [], rows: 2), file: other, shell: shell)
    }

    /// A WAL left by a writer that died before its checkpoint: the database file and its WAL as they were
    /// while the writer ran. The tool reads the rows the WAL holds, and its rekey keeps them.
    func testAWALLeftByACrashedWriterRoundTrips() throws {
        let shell = try linkedShell()
        let live = path("live.db")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = [live]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let script =
            "PRAGMA key = 'old app key';\nPRAGMA journal_mode = WAL;\nPRAGMA wal_autocheckpoint = 0;\n"
            + "CREATE TABLE t (a, b);\nINSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three');\n"
        input.fileHandleForWriting.write(Data(script.utf8))
        let crashed = path("crashed.db")
        let deadline = Date().addingTimeInterval(20)
        var copied = false
        while Date() < deadline, !copied {
            Thread.sleep(forTimeInterval: 0.2)
            let wal = (try? FileManager.default.attributesOfItem(atPath: live + "-wal")[.size] as? Int) ?? 0
            guard wal > 0 else { continue }
            Thread.sleep(forTimeInterval: 0.5)
            try FileManager.default.copyItem(atPath: live, toPath: crashed)
            try FileManager.default.copyItem(atPath: live + "-wal", toPath: crashed + "-wal")
            copied = true
        }
        process.terminate()
        process.waitUntilExit()
        XCTAssertTrue(copied, "the writer left a WAL")
        let walSize = (try? FileManager.default.attributesOfItem(atPath: crashed + "-wal")[.size] as? Int) ?? 0
        XCTAssertGreaterThan(walSize, 0)
        try roundTrip(Entry(name: "crashed-wal", pragmas: [], flags: []), file: crashed, shell: shell)
    }
}
