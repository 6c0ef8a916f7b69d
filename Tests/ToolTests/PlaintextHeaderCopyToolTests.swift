import FMDB
import Foundation
import TestSupport
import XCTest

/// A file with a plaintext header (as iOS apps in shared app-group containers write, here by the SQLCipher 4
/// shell, FMDB_SQLCIPHER4_SHELL) keeps its header through `rekey` and `export` unless a copy is asked to drop
/// it, and the shell that wrote it opens the result with the new key.
final class PlaintextHeaderCopyToolTests: ToolTestCase {
    let saltHex = "00112233445566778899aabbccddeeff"
    let oldKey = String(repeating: "2a", count: 32)
    let newKey = String(repeating: "3b", count: 32)

    func shell4() throws -> String {
        guard let shell = ProcessInfo.processInfo.environment["FMDB_SQLCIPHER4_SHELL"],
            FileManager.default.isExecutableFile(atPath: shell)
        else { throw XCTSkip("FMDB_SQLCIPHER4_SHELL (a sqlcipher 4 shell) is not set") }
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else {
            throw XCTSkip("the linked SQLCipher has no plaintext headers (its refusal is tested elsewhere)")
        }
        return shell
    }

    /// The shell's script that keys a connection as the iOS app does: raw key, header of `size`, kept salt.
    func keying(_ key: String, headerSize: Int? = 32) -> String {
        var script = "PRAGMA key = \"x'\(key)'\";\n"
        if let headerSize {
            script += "PRAGMA cipher_plaintext_header_size = \(headerSize);\nPRAGMA cipher_salt = \"x'\(saltHex)'\";\n"
        }
        return script
    }

    func makeSharedContainerFile(_ name: String, shell: String) throws -> String {
        let file = path(name)
        let made = try runSQLCipherShell(
            shell, file, keying(oldKey) + "CREATE TABLE t (a);\nINSERT INTO t VALUES (1), (2), (3);\n")
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertTrue(startsAsPlaintext(file), "the shell wrote a plaintext header")
        return file
    }

    func startsAsPlaintext(_ file: String) -> Bool {
        FileManager.default.contents(atPath: file)?.prefix(16) == Data("SQLite format 3\0".utf8)
    }

    func shellCount(_ shell: String, _ file: String, _ script: String) throws -> String {
        let read = try runSQLCipherShell(shell, file, script + "SELECT count(*) FROM t;\n")
        return read.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + read.stderr
    }

    var sourceFlags: [String] {
        ["--key-env", "K", "--kdf", "raw", "--cipher-plaintext-header-size", "32", "--cipher-salt", saltHex]
    }

    func testExportKeepsThePlaintextHeaderAndSaltUnlessAskedToDropIt() throws {
        let shell = try shell4()
        let file = try makeSharedContainerFile("shared.db", shell: shell)
        let kept = path("kept.db")
        let exported = try run(
            ["export", file, kept, "--new-key-env", "N", "--json", "--quiet"] + sourceFlags,
            env: ["K": oldKey, "N": newKey])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        XCTAssertTrue(startsAsPlaintext(kept), "the copy keeps the header")
        XCTAssertTrue(exported.stdout.contains("\"--cipher-plaintext-header-size\""), exported.stdout)
        XCTAssertEqual(try shellCount(shell, kept, keying(newKey)), "3", "the writer opens it with its salt")

        let dropped = path("dropped.db")
        let plain = try run(
            ["export", file, dropped, "--new-key-env", "N", "--new-cipher-plaintext-header-size", "0", "--quiet"]
                + sourceFlags, env: ["K": oldKey, "N": newKey])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(startsAsPlaintext(dropped), "asked to drop it: no plaintext header")
        XCTAssertEqual(try shellCount(shell, dropped, keying(newKey, headerSize: nil)), "3")
    }

    func testRekeyKeepsThePlaintextHeaderAndTheWriterOpensItWithTheNewKey() throws {
        let shell = try shell4()
        let file = try makeSharedContainerFile("rekeyed.db", shell: shell)
        let rekeyed = try run(
            ["rekey", file, "--new-key-env", "N", "--quiet"] + sourceFlags, env: ["K": oldKey, "N": newKey])
        XCTAssertEqual(rekeyed.status, 0, rekeyed.stderr)
        XCTAssertTrue(startsAsPlaintext(file), "the rekey keeps the header")
        XCTAssertEqual(try shellCount(shell, file, keying(newKey)), "3")
    }

    /// A header of 96 bytes or more covers SQLite's whole header: the file still is "encrypted, with a plaintext
    /// header", never plaintext, in `info` without a key and in `decrypt`'s message, and opens with its flags.
    func testAHeaderCoveringSQLitesWholeHeaderIsNamedEncrypted() throws {
        let shell = try shell4()
        for size in [96, 112, 256] {
            let file = path("large-\(size).db")
            let made = try runSQLCipherShell(
                shell, file, keying(oldKey, headerSize: size) + "CREATE TABLE t (a);\nINSERT INTO t VALUES (1);\n")
            XCTAssertEqual(made.status, 0, made.stderr)
            XCTAssertTrue(startsAsPlaintext(file))
            let info = try run(["info", file])
            XCTAssertTrue(info.stdout.contains("plaintext header of \(size) bytes"), "\(size): \(info.stdout)")
            let decrypt = try run(["decrypt", file, path("out-\(size).db"), "--key-env", "K"], env: ["K": oldKey])
            XCTAssertNotEqual(decrypt.status, 0, decrypt.stderr)
            XCTAssertFalse(decrypt.stderr.contains("already a plaintext"), decrypt.stderr)
            XCTAssertTrue(decrypt.stderr.contains("plaintext header of \(size) bytes"), decrypt.stderr)
            let read = try run(
                [
                    "sql", file, "SELECT count(*) FROM t", "--csv", "--key-env", "K", "--kdf", "raw",
                    "--cipher-plaintext-header-size", String(size), "--cipher-salt", saltHex,
                ], env: ["K": oldKey])
            XCTAssertEqual(read.status, 0, read.stderr)
            XCTAssertEqual(read.stdout.split(separator: "\n").last, "1", read.stdout)
        }
    }
}
