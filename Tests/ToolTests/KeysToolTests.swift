import FMDB
import Foundation
import TestSupport
import XCTest

/// End-to-end tests of `fmdb-cipher keys ...`, `rekey --data-key` and `--key-credential`, run as a
/// subprocess (real scrypt slots: each unlock costs one KDF).
final class KeysToolTests: ToolTestCase {
    /// A slotted database: passphrases "alpha" (slot 1) and "beta" (slot 3), a recovery key (slot 2), one row.
    func makeSlotted() throws -> (path: String, recovery: String) {
        let db = directory.path("app.db")
        let created = try run(
            ["keys", "init", db, "--key-env", "K", "--recovery", "--slot-kdf", "pbkdf2"], env: ["K": "alpha"])
        XCTAssertEqual(created.status, 0, created.stderr)
        let recovery = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(recovery.split(separator: "-").count, 9, created.stdout)
        let added = try run(
            ["keys", "add", db, "--key-env", "K", "--new-key-env", "N"], env: ["K": "alpha", "N": "beta"])
        XCTAssertEqual(added.status, 0, added.stderr)
        let made = try run(
            ["sql", db, "--kdf", "slot", "--key-env", "K", "create table t (a); insert into t values ('slotted')"],
            env: ["K": "beta"])
        XCTAssertEqual(made.status, 0, made.stderr)
        return (db, recovery)
    }

    func select(_ db: String, kdf: String, key: String) throws -> (status: Int32, stdout: String, stderr: String) {
        try run(["sql", db, "--kdf", kdf, "--key-env", "K", "--csv", "select a from t"], env: ["K": key])
    }

    func testTwoPassphrasesAndTheRecoveryKeyOpenTheDatabaseInTheTool() throws {
        let (db, recovery) = try makeSlotted()
        for (kdf, key) in [
            ("slot", "alpha"), ("slot", "beta"), ("slot-recovery", recovery), ("slot-recovery", recovery.lowercased()),
        ] {
            let result = try select(db, kdf: kdf, key: key)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(result.stdout.contains("slotted"), result.stdout)
        }
        let wrong = try select(db, kdf: "slot", key: "gamma")
        XCTAssertEqual(wrong.status, 65, wrong.stderr)
        XCTAssertFalse(wrong.stderr.contains("gamma"))
        let list = try run(["keys", "list", db, "--json"])
        XCTAssertEqual(list.status, 0, list.stderr)
        let slots = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(slots.compactMap { $0["id"] as? Int }, [1, 2, 3])
        XCTAssertEqual(slots.compactMap { $0["kind"] as? String }, ["passphrase", "recovery", "passphrase"])
        XCTAssertEqual(slots.first?["kdf"] as? String, "pbkdf2-sha512 256000")
        XCTAssertFalse(list.stdout.contains(recovery))
    }

    func testChangeRemoveAndExportRaw() throws {
        let (db, recovery) = try makeSlotted()
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        let changed = try run(
            ["keys", "change", db, "--key-env", "K", "--new-key-env", "N"], env: ["K": "alpha", "N": "alpha 2"])
        XCTAssertEqual(changed.status, 0, changed.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: db)), before, "change must not touch the database")
        XCTAssertEqual(try select(db, kdf: "slot", key: "alpha").status, 65)
        XCTAssertEqual(try select(db, kdf: "slot", key: "alpha 2").status, 0)

        let removed = try run(["keys", "remove", db, "--key-env", "K", "--slot", "3"], env: ["K": "alpha 2"])
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertEqual(try select(db, kdf: "slot", key: "beta").status, 65)
        XCTAssertEqual(try select(db, kdf: "slot-recovery", key: recovery).status, 0)

        let refused = try run(["keys", "export-raw", db, "--key-env", "K"], env: ["K": "alpha 2"])
        XCTAssertEqual(refused.status, 64)
        XCTAssertEqual(refused.stdout, "")
        let exported = try run(
            [
                "keys", "export-raw", db, "--key-env", "K", "--kdf", "slot-recovery",
                "--i-understand-this-reveals-the-data-key",
            ],
            env: ["K": recovery])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let hex = exported.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(hex.count, 64)
        let shell = try lineShell()
        let opened = try runProcess(shell, [db], input: "PRAGMA key = \"x'\(hex)'\";\nSELECT a FROM t;\n")
        // The 4.x shell answers PRAGMA key with "ok" (3.4.1 prints nothing): only the query's row counts.
        let rows = opened.stdout.split(separator: "\n").filter { $0 != "ok" }
        XCTAssertEqual(rows, ["slotted"], opened.stdout + opened.stderr)

        // Rotation: the old data key stops opening the database; every kept slot still does.
        let recoveryFile = directory.path("recovery.txt")
        try Data((recovery + "\n").utf8).write(to: URL(fileURLWithPath: recoveryFile))
        let rotated = try run(
            ["rekey", "--data-key", db, "--key-env", "K", "--slot-key-file", recoveryFile, "--quiet"],
            env: ["K": "alpha 2"])
        XCTAssertEqual(rotated.status, 0, rotated.stderr)
        let stale = try runProcess(shell, [db], input: "PRAGMA key = \"x'\(hex)'\";\nSELECT a FROM t;\n")
        XCTAssertTrue(stale.stderr.contains("not a database"), stale.stderr)
        XCTAssertEqual(try select(db, kdf: "slot", key: "alpha 2").status, 0)
        XCTAssertEqual(try select(db, kdf: "slot-recovery", key: recovery).status, 0)
    }

    func testRotationRefusesSlotsItCannotRewrapUnlessDropped() throws {
        let (db, _) = try makeSlotted()
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        let refused = try run(["rekey", "--data-key", db, "--key-env", "K", "--quiet"], env: ["K": "alpha"])
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("2, 3"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: db)), before)
        let dropped = try run(
            ["rekey", "--data-key", db, "--key-env", "K", "--drop-other-slots", "--quiet"], env: ["K": "alpha"])
        XCTAssertEqual(dropped.status, 0, dropped.stderr)
        XCTAssertEqual(try select(db, kdf: "slot", key: "beta").status, 65)
        XCTAssertEqual(try select(db, kdf: "slot", key: "alpha").status, 0)
        let misuse = try run(["rekey", "--data-key", db, "--key-env", "K", "--new-key-env", "K"], env: ["K": "alpha"])
        XCTAssertEqual(misuse.status, 64)
        // A plain rekey would leave the slots wrapping a key the database no longer has: refused.
        let plain = try run(
            ["rekey", db, "--kdf", "slot", "--key-env", "K", "--new-key-env", "N", "--new-kdf", "raw"],
            env: ["K": "alpha", "N": String(repeating: "ab", count: 32)])
        XCTAssertEqual(plain.status, 64, plain.stderr)
        XCTAssertEqual(try select(db, kdf: "slot", key: "alpha").status, 0)
    }

    func testInitRefusesExistingFilesAndMissingSlotFilesAreExit66() throws {
        let (db, _) = try makeSlotted()
        XCTAssertEqual(try run(["keys", "init", db, "--key-env", "K"], env: ["K": "x"]).status, 73)
        let slots = KeySlots.slotFilePath(forDatabaseAt: db)
        try FileManager.default.moveItem(atPath: slots, toPath: slots + ".away")
        XCTAssertEqual(try select(db, kdf: "slot", key: "alpha").status, 66)
        XCTAssertEqual(try run(["keys", "list", db]).status, 66)
        try FileManager.default.moveItem(atPath: slots + ".away", toPath: slots)
        // Damaged: exit 2 (damage) when the flip breaks the file's structure or tag, 65 when it lands in the
        // slot's own wrapped key (then no slot accepts the key, as for a wrong one); nothing written.
        var damaged = try Data(contentsOf: URL(fileURLWithPath: slots))
        damaged[damaged.count / 2] ^= 0x20
        try damaged.write(to: URL(fileURLWithPath: slots))
        XCTAssertTrue([2, 65].contains(try select(db, kdf: "slot", key: "alpha").status))
        XCTAssertNotEqual(
            try run(["keys", "add", db, "--key-env", "K", "--new-key-env", "K"], env: ["K": "alpha"]).status, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: slots)), damaged)
    }

    /// Security review: `keys init` on a planted symbolic link is refused (the link is not followed), and
    /// a new slotted database is 0600 under umask 022.
    func testKeysInitNeverFollowsALinkAndMakesAPrivateFile() throws {
        let other = directory.path("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        let planted = directory.path("planted.db")
        try FileManager.default.createSymbolicLink(atPath: planted, withDestinationPath: other + "/target.db")
        func initUnderUmask022(_ path: String) throws -> (status: Int32, stdout: String, stderr: String) {
            try run(["keys", "init", path, "--key-env", "ADMIN", "--slot-kdf", "pbkdf2"], env: ["ADMIN": "alpha"])
        }
        let refused = try initUnderUmask022(planted)
        XCTAssertEqual(refused.status, 73, refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: other + "/target.db"))
        let plain = directory.path("plain.db")
        let created = try initUnderUmask022(plain)
        XCTAssertEqual(created.status, 0, created.stderr)
        for file in [plain, KeySlots.slotFilePath(forDatabaseAt: plain)] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600, file)
        }
    }

    /// Security review: a crafted slot file (scrypt r·p overflowing) is a damaged file (exit 2, damage, not
    /// 65, a wrong key), not a crash (it trapped: exit 132).
    func testASlotFileWithOverflowingScryptParametersIsRefusedNotACrash() throws {
        let db = directory.path("t.db")
        let created = try run(["keys", "init", db, "--key-env", "ADMIN"], env: ["ADMIN": "alpha"])
        XCTAssertEqual(created.status, 0, created.stderr)
        let slots = KeySlots.slotFilePath(forDatabaseAt: db)
        let text = try String(contentsOfFile: slots, encoding: .utf8)
        XCTAssertTrue(text.contains("\"p\":1") && text.contains("\"r\":8"), text)
        let crafted = text.replacingOccurrences(of: "\"p\":1", with: "\"p\":2").replacingOccurrences(
            of: "\"r\":8", with: "\"r\":9223372036854775808")
        try Data(crafted.utf8).write(to: URL(fileURLWithPath: slots))
        let opened = try run(["sql", db, "--kdf", "slot", "--key-env", "ADMIN", "SELECT 1"], env: ["ADMIN": "alpha"])
        XCTAssertEqual(opened.status, 2, opened.stderr)
        let listed = try run(["keys", "list", db])
        XCTAssertEqual(listed.status, 2, listed.stderr)
    }

    func testKeyCredentialReadsTheSystemdCredentialsDirectory() throws {
        let (db, _) = try makeSlotted()
        let credentials = directory.path("creds")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try Data("beta\n".utf8).write(to: URL(fileURLWithPath: credentials + "/app-pass"))
        XCTAssertEqual(chmod(credentials + "/app-pass", 0o400), 0)
        let ok = try run(
            ["sql", db, "--kdf", "slot", "--key-credential", "app-pass", "--csv", "select a from t"],
            env: ["CREDENTIALS_DIRECTORY": credentials])
        XCTAssertEqual(ok.status, 0, ok.stderr)
        XCTAssertTrue(ok.stdout.contains("slotted"))
        XCTAssertEqual(chmod(credentials + "/app-pass", 0o644), 0)
        let tooOpen = try run(
            ["sql", db, "--kdf", "slot", "--key-credential", "app-pass", "select 1"],
            env: ["CREDENTIALS_DIRECTORY": credentials])
        XCTAssertEqual(tooOpen.status, 66, tooOpen.stderr)
        XCTAssertTrue(tooOpen.stderr.contains("group or others"), tooOpen.stderr)
        var environment = ProcessInfo.processInfo.environment
        environment["CREDENTIALS_DIRECTORY"] = nil
        let unset = try runProcess(
            tool, ["sql", db, "--kdf", "slot", "--key-credential", "app-pass", "select 1"], input: "",
            environment: environment)
        XCTAssertEqual(unset.status, 66, unset.stderr)
        XCTAssertTrue(unset.stderr.contains("CREDENTIALS_DIRECTORY"), unset.stderr)
        let twoWays = try run(["sql", db, "--key-env", "K", "--key-credential", "x", "select 1"], env: ["K": "k"])
        XCTAssertEqual(twoWays.status, 64)
    }

    /// Security review: `--key-credential "$SECRET"` (the value where its name belongs) never prints the
    /// value, whatever goes wrong, as `--key-env` never does.
    func testKeyCredentialErrorsNeverPrintTheValue() throws {
        let (db, _) = try makeSlotted()
        let credentials = directory.path("creds")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: credentials + "/S3cr3tOpen"))
        XCTAssertEqual(chmod(credentials + "/S3cr3tOpen", 0o644), 0)
        var unsetEnvironment = ProcessInfo.processInfo.environment
        unsetEnvironment["CREDENTIALS_DIRECTORY"] = nil
        for value in ["S3cr3t+Pass/word==", "S3cr3tPassw0rd", "S3cr3tOpen"] {
            for command in [
                ["sql", db, "--kdf", "slot", "--key-credential", value, "select 1"],
                ["keys", "add", db, "--key-credential", value, "--new-key-env", "N"],
            ] {
                let set = try run(command, env: ["CREDENTIALS_DIRECTORY": credentials, "N": "gamma"])
                let unset = try runProcess(tool, command, input: "", environment: unsetEnvironment)
                for result in [set, unset] {
                    XCTAssertNotEqual(result.status, 0)
                    XCTAssertFalse(result.stderr.contains("S3cr3t"), result.stderr)
                    XCTAssertFalse(result.stdout.contains("S3cr3t"), result.stdout)
                }
            }
        }
    }
}
