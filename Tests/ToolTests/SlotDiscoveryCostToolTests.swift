import FMDB
import Foundation
import TestSupport
import XCTest

/// What a slot file beside a database can make the tool do: a planted file of expensive slots is not tried
/// slot by slot (the library's work budget) and does not stop the database's right key; a slot file others
/// can change, or owned by another user, is not used; a slotted database of several default slots opens
/// through any of them, or through one named with `--slot ID`; a wrong key names the slot file it was tried
/// against.
final class SlotDiscoveryCostToolTests: ToolTestCase {
    /// A single-key database (passphrase "the single key") with 7 rows.
    func makeSingleKey() throws -> String {
        let plain = try makePlaintext(rows: 7)
        let single = path("single.db")
        let made = try run(["encrypt", plain, single, "--key-env", "K", "--quiet"], env: ["K": "the single key"])
        XCTAssertEqual(made.status, 0, made.stderr)
        return single
    }

    /// A slotted database of three passphrase slots of the default KDF (scrypt N=2^15, r=8), empty.
    func makeSlotted() throws -> String {
        let database = path("slotted.db")
        try KeySlots.createDatabase(at: database, secret: .passphrase("first passphrase"))
        for next in ["second passphrase", "third passphrase"] {
            try KeySlots.addSlot(
                to: database, unlockingWith: .passphrase("first passphrase"), newSecret: .passphrase(next))
        }
        return database
    }

    func testAPlantedFileOfExpensiveSlotsIsNotTriedAndTheRightKeyStillOpens() throws {
        let single = try makeSingleKey()
        // 40 scrypt slots of N=2^17, r=8: together over the budget (each within the per-slot bound).
        let planted = try PlantedSlotFile.write(besideDatabaseAt: single, count: 40, n: 1 << 17, r: 8)
        let sql = try run(
            ["sql", single, "select count(*) from t", "--csv", "--key-env", "K"], env: ["K": "the single key"])
        XCTAssertEqual(sql.status, 0, sql.stderr)
        XCTAssertEqual(sql.stdout.split(whereSeparator: \.isNewline), ["count(*)", "7"])
        XCTAssertTrue(sql.stderr.contains("warning: the key slots in \(planted) were not tried"), sql.stderr)
        XCTAssertTrue(sql.stderr.contains("does not belong"), sql.stderr)

        // A wrong key: the budget is said (exit 64), naming the slot file and the way to name a slot.
        let wrong = try run(["check", single, "--key-env", "K"], env: ["K": "not the key"])
        XCTAssertEqual(wrong.status, 64, wrong.stderr)
        XCTAssertTrue(wrong.stderr.contains("the key slots in \(planted) were not tried"), wrong.stderr)
        XCTAssertTrue(wrong.stderr.contains("--slot ID"), wrong.stderr)
        XCTAssertFalse(wrong.stderr.contains("not the key"), wrong.stderr)
        // --kdf slot unlocks through the library's same budget.
        let explicit = try run(
            ["sql", single, "select 1", "--kdf", "slot", "--key-env", "K"], env: ["K": "not the key"])
        XCTAssertEqual(explicit.status, 64, explicit.stderr)
        XCTAssertTrue(explicit.stderr.contains(planted), explicit.stderr)
        // keys commands unlock the same way.
        let keys = try run(
            ["keys", "add", single, "--key-env", "K", "--new-key-env", "N"],
            env: ["K": "not the key", "N": "a new passphrase"])
        XCTAssertEqual(keys.status, 64, keys.stderr)
        XCTAssertTrue(keys.stderr.contains(planted), keys.stderr)
    }

    func testSeveralDefaultSlotsOpenThroughAnyAndASlotCanBeNamed() throws {
        let database = try makeSlotted()
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        let last = try run(
            ["sql", database, "select count(*) from sqlite_master", "--csv", "--key-env", "K"],
            env: ["K": "third passphrase"])
        XCTAssertEqual(last.status, 0, last.stderr)
        XCTAssertEqual(last.stdout.split(whereSeparator: \.isNewline), ["count(*)", "0"])
        XCTAssertFalse(last.stderr.contains("warning"), last.stderr)

        let named = try run(
            ["check", database, "--slot", "2", "--key-env", "K"], env: ["K": "second passphrase"])
        XCTAssertEqual(named.status, 0, named.stderr)
        // The right passphrase of another slot: that slot only is tried.
        let other = try run(
            ["check", database, "--slot", "2", "--key-env", "K"], env: ["K": "third passphrase"])
        XCTAssertEqual(other.status, 65, other.stderr)
        XCTAssertTrue(other.stderr.contains("no key slot in \(slotFile) accepts it"), other.stderr)
        let missing = try run(["check", database, "--slot", "9", "--key-env", "K"], env: ["K": "third passphrase"])
        XCTAssertEqual(missing.status, 64, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("has no slot 9"), missing.stderr)
        let notSlotted = try run(
            ["check", try makeSingleKey(), "--slot", "1", "--key-env", "K"], env: ["K": "the single key"])
        XCTAssertEqual(notSlotted.status, 64, notSlotted.stderr)
    }

    func testAWrongKeyNamesTheSlotFile() throws {
        let database = try makeSlotted()
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        for command in [["sql", database, "select 1"], ["sql", database, "select 1", "--kdf", "slot"]] {
            let wrong = try run(command + ["--key-env", "K"], env: ["K": "not a slot's secret"])
            XCTAssertEqual(wrong.status, 65, "\(command): \(wrong.stderr)")
            XCTAssertTrue(
                wrong.stderr.contains("wrong key: no key slot in \(slotFile) accepts it"), "\(command): \(wrong.stderr)"
            )
            XCTAssertFalse(wrong.stderr.contains("not a slot's secret"), wrong.stderr)
        }
        let keys = try run(
            ["keys", "change", database, "--key-env", "K", "--new-key-env", "N"],
            env: ["K": "not a slot's secret", "N": "a new passphrase"])
        XCTAssertEqual(keys.status, 65, keys.stderr)
        XCTAssertTrue(keys.stderr.contains("no key slot in \(slotFile) accepts it"), keys.stderr)
    }

    func testASlotFileOthersCanChangeIsNotUsed() throws {
        let database = try makeSlotted()
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: database)
        XCTAssertEqual(chmod(slotFile, 0o664), 0)
        for extra in [[], ["--kdf", "slot"]] {
            let result = try run(
                ["check", database, "--key-env", "K"] + extra, env: ["K": "first passphrase"])
            XCTAssertEqual(result.status, 66, "\(extra): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("the key slot file \(slotFile) is not used"), result.stderr)
            XCTAssertTrue(result.stderr.contains("chmod 600"), result.stderr)
        }
        let keys = try run(
            ["keys", "change", database, "--key-env", "K", "--new-key-env", "N"],
            env: ["K": "first passphrase", "N": "a new passphrase"])
        XCTAssertEqual(keys.status, 66, keys.stderr)
        // info still lists the slots, and says why they are not used.
        let info = try run(["info", database])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertTrue(info.stdout.contains("not used to open the database: it has mode 0664"), info.stdout)
        let json = try run(["info", database, "--json"])
        XCTAssertTrue(json.stdout.contains("\"key_slots_not_used\""), json.stdout)
        XCTAssertEqual(chmod(slotFile, 0o600), 0)
        XCTAssertFalse(try run(["info", database]).stdout.contains("not used"))
    }

    func testASlotFileOwnedByAnotherUserIsNotUsed() throws {
        // Owned by someone else than root, this user or the database's owner: only root can make one here.
        guard geteuid() == 0 else { throw XCTSkip("only root can give a slot file to another user") }
        let single = try makeSingleKey()
        let planted = try PlantedSlotFile.write(besideDatabaseAt: single, count: 1, n: 1 << 15, r: 8)
        XCTAssertEqual(chown(planted, 65534, 65534), 0)
        let opened = try run(["check", single, "--key-env", "K"], env: ["K": "the single key"])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertTrue(opened.stderr.contains("the key slot file \(planted) is not used"), opened.stderr)
        XCTAssertTrue(opened.stderr.contains("owned by user id 65534"), opened.stderr)
        let wrong = try run(["check", single, "--key-env", "K"], env: ["K": "not the key"])
        XCTAssertEqual(wrong.status, 66, wrong.stderr)
    }

    func testALockedDatabaseIsNotCalledAWrongKeyWhateverTheSlotFile() throws {
        let single = try makeSingleKey()
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: single)
        // Planted before the lock is taken: reading the database here would drop this process's lock on it.
        // A slot file no slot of which accepts the key, and one over the work budget.
        try PlantedSlotFile.write(besideDatabaseAt: single, count: 1, n: 1 << 14)
        XCTAssertEqual(rename(slotFile, slotFile + ".refused"), 0)
        try PlantedSlotFile.write(besideDatabaseAt: single, count: 40, n: 1 << 17, r: 8)
        XCTAssertEqual(rename(slotFile, slotFile + ".budget"), 0)
        let holder = FMDatabase(path: single)
        XCTAssertTrue(holder.open())
        try holder.setKey(using: PassphraseKeyProvider("the single key"))
        let release = holdExclusiveLock(holder, running: "BEGIN EXCLUSIVE; INSERT INTO t (v) VALUES ('held')", for: nil)
        defer { release() }
        let cases: [(String, () -> Void)] = [
            ("refused", { XCTAssertEqual(rename(slotFile + ".refused", slotFile), 0) }),
            ("over the budget", { XCTAssertEqual(rename(slotFile + ".budget", slotFile), 0) }),
            // Others can change it: not used.
            ("not used", { XCTAssertEqual(chmod(slotFile, 0o666), 0) }),
        ]
        for (name, plant) in cases {
            plant()
            let sql = try run(
                ["sql", single, "select count(*) from t", "--key-env", "K"], env: ["K": "the single key"])
            XCTAssertEqual(sql.status, 75, "\(name): \(sql.stderr)")
            XCTAssertTrue(sql.stderr.contains("database is locked"), "\(name): \(sql.stderr)")
            XCTAssertFalse(sql.stderr.contains("wrong key"), "\(name): \(sql.stderr)")
        }
    }

    func testTheRightKeyOpensBesideASlotFileThatIsDamagedOrNotARegularFile() throws {
        let single = try makeSingleKey()
        let slotFile = KeySlots.slotFilePath(forDatabaseAt: single)
        let cases: [(name: String, code: Int32, plant: () throws -> Void)] = [
            (
                "damaged", 2,
                {
                    try Data("not a slot file\n".utf8).write(to: URL(fileURLWithPath: slotFile))
                    XCTAssertEqual(chmod(slotFile, 0o600), 0)
                }
            ),
            ("a dangling link", 66, { XCTAssertEqual(symlink(self.path("nowhere"), slotFile), 0) }),
            ("a directory", 66, { XCTAssertEqual(mkdir(slotFile, 0o700), 0) }),
        ]
        for (name, code, plant) in cases {
            _ = remove(slotFile)
            try plant()
            // A slot file that is not a regular file is never opened: a 20 s limit turns a hang into a failure.
            let limit = ["/usr/bin/timeout", "-s", "KILL", "20"]
            let right = try runTool(
                ["sql", single, "select count(*) from t", "--csv", "--key-env", "K"], env: ["K": "the single key"],
                wrapper: limit)
            XCTAssertEqual(right.status, 0, "\(name): \(right.stderr)")
            XCTAssertEqual(right.stdout.split(whereSeparator: \.isNewline), ["count(*)", "7"], name)
            XCTAssertTrue(right.stderr.contains("warning: the key slot file \(slotFile) is not used"), right.stderr)
            let wrong = try runTool(["check", single, "--key-env", "K"], env: ["K": "not the key"], wrapper: limit)
            XCTAssertEqual(wrong.status, code, "\(name): \(wrong.stderr)")
            XCTAssertTrue(wrong.stderr.contains(slotFile), "\(name): \(wrong.stderr)")
            XCTAssertFalse(wrong.stderr.contains("not the key"), wrong.stderr)
        }
    }

    func testASlotWithoutAKeyIsAUsageError() throws {
        let single = try makeSingleKey()
        try PlantedSlotFile.write(besideDatabaseAt: single, count: 1, n: 1 << 14)
        for command in [["info", single], ["check", try makePlaintext("other.db")], ["sql", single, "select 1"]] {
            let result = try run(command + ["--slot", "3"])
            XCTAssertEqual(result.status, 64, "\(command): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("--slot opens through a key slot with its key"), result.stderr)
        }
    }
}
