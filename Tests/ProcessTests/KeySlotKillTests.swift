import FMDB
import Foundation
import TestSupport
import XCTest

/// SIGKILL at random moments during `fmdb-cipher keys change` (a slot file write), `rekey --data-key`
/// (a slot file write, a full rekey, another slot file write) and a slotted `export`: afterwards the slot
/// file is the old or the new one, never neither, the database always opens with its slot's passphrase,
/// intact, and a copy at DEST always has its slot file.
final class KeySlotKillTests: FMDBCipherTestCase {
    var tool: String!
    var rng = SeededGenerator(seed: 0x51075)

    override func setUpWithError() throws {
        try super.setUpWithError()
        tool = try builtTool()
    }

    var kills: Int { ProcessInfo.processInfo.environment["FMDB_KILLS"].flatMap(Int.init) ?? 15 }

    /// Runs the tool, SIGKILLs it after `delay` seconds if still running; returns whether it was killed.
    func runToolAndKill(_ arguments: [String], after delay: Double, env: [String: String]) throws -> Bool {
        try TestSupport.runAndKill(tool, arguments, after: delay, environment: env).killed
    }

    func opens(_ path: String, passphrase: String) -> Int32? {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open() else { return nil }
        defer { db.close() }
        guard (try? db.setKey(using: KeySlotKeyProvider(secret: .passphrase(passphrase)))) != nil,
            db.string(forQuery: "PRAGMA integrity_check") == "ok"
        else { return nil }
        return db.int(forQuery: "select count(*) from big")
    }

    func makeSlotted(rows: Int) throws -> String {
        let path = directory.path("slotted.db")
        try KeySlots.createDatabase(at: path, secret: .passphrase("p0"), kdf: .pbkdf2SHA512(iterations: 64_000))
        let queue = try FMDatabaseQueue(path: path, keyProvider: KeySlotKeyProvider(secret: .passphrase("p0")))
        try queue.inDatabase { db in
            try db.executeUpdate("create table big (id integer primary key, payload blob)", values: nil)
            try db.inTransaction { db in
                for _ in 0..<rows {
                    try db.executeUpdate("insert into big (payload) values (randomblob(1000))", values: nil)
                }
            }
        }
        queue.close()
        return path
    }

    func testKillDuringSlotChangeLeavesTheOldOrTheNewSlot() throws {
        let path = try makeSlotted(rows: 100)
        // One unkilled run tells how long a change takes here; the kills then land in its second half,
        // where the slot file is written.
        let started = Date()
        XCTAssertFalse(
            try runToolAndKill(
                ["keys", "change", path, "--key-env", "OLD", "--new-key-env", "NEW", "--slot-kdf", "pbkdf2"],
                after: 120, env: ["OLD": "p0", "NEW": "p-timed"]))
        let duration = Date().timeIntervalSince(started)
        var current = "p-timed"
        var outcomes = [String: Int]()
        for round in 0..<kills {
            let next = "p\(round + 1)"
            let delay = Double.random(in: (0.5 * duration)...(1.1 * duration), using: &rng)
            let killed = try runToolAndKill(
                ["keys", "change", path, "--key-env", "OLD", "--new-key-env", "NEW", "--slot-kdf", "pbkdf2"],
                after: delay, env: ["OLD": current, "NEW": next])
            let old = opens(path, passphrase: current)
            let new = opens(path, passphrase: next)
            XCTAssertTrue(
                (old == 100) != (new == 100),
                "round \(round): exactly one of the two passphrases opens (old \(String(describing: old)), new "
                    + "\(String(describing: new)))"
            )
            XCTAssertEqual(try KeySlots.list(forDatabaseAt: path).count, 1, "round \(round): the slot file reads")
            let now = new == 100 ? next : current
            outcomes[killed ? (now == current ? "killed, old slot" : "killed, new slot") : "finished", default: 0] += 1
            current = now
        }
        print("kill during keys change outcomes: \(outcomes)")
    }

    /// The library's slot file writes, killed mid-stream: a helper changes a slot over and over (cheap
    /// KDF, so the time goes to the temporary file, fsync, rename and directory fsync).
    func testKillDuringSlotFileWritesNeverLosesTheSlot() throws {
        let helper = try XCTUnwrap(builtProduct("fmdb-test-helper"))
        let path = directory.path("writes.db")
        try KeySlots.createDatabase(at: path, secret: .passphrase("p0"), kdf: .unsafePBKDF2SHA512(iterations: 1_000))
        var acknowledged = 0
        var outcomes = [String: Int]()
        for round in 0..<kills {
            // Every other round's delay counts from the helper's first acknowledged change, so however loaded
            // the machine, those rounds kill a helper that has made progress; the rounds between count from
            // its start, so kills also land while it opens the slot file.
            let afterProgress = round % 2 == 1
            let delay = Double.random(in: 0.05...0.4, using: &rng)
            let (output, killed) = try TestSupport.runAndKill(
                helper, ["slot-changer", path, String(acknowledged)], after: delay, onceItPrints: afterProgress)
            let acks = output.split(separator: "\n").compactMap { Int($0) }
            if afterProgress { XCTAssertFalse(acks.isEmpty, "round \(round): the helper acknowledged a change") }
            let last = acks.last ?? acknowledged
            // The change after the last acknowledged one may have landed before the kill.
            let current = opensSlot(path, "p\(last)") ? last : (opensSlot(path, "p\(last + 1)") ? last + 1 : nil)
            guard let current else {
                XCTFail("round \(round): neither p\(last) nor p\(last + 1) opens the database")
                return
            }
            XCTAssertFalse(
                opensSlot(path, "p\(current == last ? last + 1 : last)"), "round \(round): only one passphrase opens")
            outcomes[
                killed
                    ? (current == last ? "killed, acknowledged slot" : "killed, unacknowledged new slot") : "finished",
                default: 0] += 1
            acknowledged = current
        }
        XCTAssertGreaterThanOrEqual(acknowledged, kills / 2, "the helper made progress")
        print("kill during slot file writes: \(acknowledged) changes, outcomes \(outcomes)")
    }

    func opensSlot(_ path: String, _ passphrase: String) -> Bool {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open() else { return false }
        defer { db.close() }
        return (try? db.setKey(using: KeySlotKeyProvider(secret: .passphrase(passphrase)))) != nil
    }

    /// SIGKILL at random moments of `export --kdf slot` (a copy that carries the slot file): DEST never
    /// exists without its slot file (DEST-keyslots is moved into place first), and a DEST that exists is
    /// complete and opens through the copied slots. (The window between the two renames is a directory
    /// fsync: with the renames swapped, 40 kills did not land in it, so this guards the outcome, not the order.)
    func testKillDuringASlottedExportNeverLeavesADestWithoutItsSlotFile() throws {
        let rows: Int32 = 3_000
        let source = try makeSlotted(rows: Int(rows))
        let dest = directory.path("copy.db")
        let destSlots = KeySlots.slotFilePath(forDatabaseAt: dest)
        let sourceSlots = try Data(contentsOf: URL(fileURLWithPath: KeySlots.slotFilePath(forDatabaseAt: source)))
        func reset() throws {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
            where name.hasPrefix("copy.db") || name.hasPrefix(".copy.db.fmdb-cipher-") {
                try FileManager.default.removeItem(atPath: directory.path(name))
            }
        }
        let arguments = ["export", source, dest, "--kdf", "slot", "--key-env", "K", "--quiet"]
        let started = Date()
        XCTAssertFalse(try runToolAndKill(arguments, after: 120, env: ["K": "p0"]))
        let duration = Date().timeIntervalSince(started)
        XCTAssertEqual(opens(dest, passphrase: "p0"), rows)
        var outcomes = [String: Int]()
        for round in 0..<kills {
            try reset()
            let killed = try runToolAndKill(
                arguments, after: Double.random(in: (0.6 * duration)...(1.05 * duration), using: &rng),
                env: ["K": "p0"])
            let hasDest = FileManager.default.fileExists(atPath: dest)
            let hasSlots = FileManager.default.fileExists(atPath: destSlots)
            if hasDest {
                XCTAssertTrue(hasSlots, "round \(round): DEST without its slot file")
                XCTAssertEqual(
                    opens(dest, passphrase: "p0"), rows, "round \(round): DEST is complete and opens through its slots")
            }
            if hasSlots {
                XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: destSlots)), sourceSlots, "round \(round)")
            }
            let outcome =
                hasDest
                ? "copy in place" : (hasSlots ? "slot file only (killed between the renames)" : "nothing at DEST")
            outcomes[killed ? "killed, \(outcome)" : "finished", default: 0] += 1
        }
        print("kill during a slotted export outcomes: \(outcomes)")
    }

    /// SIGKILL at random moments of `export --kdf slot --force` over a DEST that has slots of its own (another
    /// database, passphrase "old"): a DEST that exists is the old pair or the new one, never one beside the
    /// other's slot file, and until the new copy is at DEST the old pair is whole (at DEST, or as old.db +
    /// old.db-keyslots in the private directory). `SlotReplaceToolTests` kills each move in turn with strace.
    func testKillDuringAForcedSlottedExportOverASlottedDestLeavesMatchingPairs() throws {
        let rows: Int32 = 3_000
        let source = try makeSlotted(rows: Int(rows))
        let dest = directory.path("copy.db")
        let destSlots = KeySlots.slotFilePath(forDatabaseAt: dest)
        let sourceSlots = try Data(contentsOf: URL(fileURLWithPath: KeySlots.slotFilePath(forDatabaseAt: source)))
        func reset() throws {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
            where name.hasPrefix("copy.db") || name.hasPrefix(".copy.db.fmdb-cipher-") {
                try FileManager.default.removeItem(atPath: directory.path(name))
            }
            try KeySlots.createDatabase(
                at: dest, secret: .passphrase("old"), kdf: .unsafePBKDF2SHA512(iterations: 1_000))
            let queue = try FMDatabaseQueue(path: dest, keyProvider: KeySlotKeyProvider(secret: .passphrase("old")))
            try queue.inDatabase { db in
                try db.executeUpdate("create table big (id integer primary key, payload blob)", values: nil)
                for _ in 0..<5 {
                    try db.executeUpdate("insert into big (payload) values (randomblob(10))", values: nil)
                }
            }
            queue.close()
        }
        func exists(_ path: String) -> Bool {
            var status = stat()
            return lstat(path, &status) == 0
        }
        let arguments = ["export", source, dest, "--kdf", "slot", "--key-env", "K", "--quiet", "--force"]
        try reset()
        let started = Date()
        XCTAssertFalse(try runToolAndKill(arguments, after: 120, env: ["K": "p0"]))
        let duration = Date().timeIntervalSince(started)
        XCTAssertEqual(opens(dest, passphrase: "p0"), rows)
        var outcomes = [String: Int]()
        for round in 0..<kills {
            try reset()
            let oldSlots = try Data(contentsOf: URL(fileURLWithPath: destSlots))
            let killed = try runToolAndKill(
                arguments, after: Double.random(in: (0.6 * duration)...(1.05 * duration), using: &rng),
                env: ["K": "p0"])
            // exists() first: opening a missing DEST would create it.
            let hasDest = exists(dest)
            let newAtDest =
                hasDest && opens(dest, passphrase: "p0") == rows
                && (try? Data(contentsOf: URL(fileURLWithPath: destSlots))) == sourceSlots
            let oldAtDest =
                hasDest && opens(dest, passphrase: "old") == 5
                && (try? Data(contentsOf: URL(fileURLWithPath: destSlots))) == oldSlots
            if hasDest { XCTAssertTrue(newAtDest != oldAtDest, "round \(round): DEST is the old pair or the new one") }
            let asideDirectory = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
                .first { $0.hasPrefix(".copy.db.fmdb-cipher-") }.map { directory.path($0) }
            let oldAside =
                asideDirectory.map { exists($0 + "/old.db") && opens($0 + "/old.db", passphrase: "old") == 5 } ?? false
            if !newAtDest {
                XCTAssertTrue(oldAtDest || oldAside, "round \(round): the old pair is whole, at DEST or aside")
            }
            let outcome = newAtDest ? "new pair at DEST" : oldAtDest ? "old pair at DEST" : "no DEST, old pair aside"
            outcomes[killed ? "killed, \(outcome)" : "finished", default: 0] += 1
        }
        print("kill during a forced slotted export over a slotted DEST outcomes: \(outcomes)")
    }

    func testKillDuringDataKeyRotationAlwaysOpens() throws {
        let rows: Int32 = 12_000
        let path = try makeSlotted(rows: Int(rows))
        var outcomes = [String: Int]()
        for round in 0..<max(kills / 2, 4) {
            let delay = Double.random(in: 0.1...2.5, using: &rng)
            let killed = try runToolAndKill(
                ["rekey", "--data-key", path, "--key-env", "K", "--quiet"], after: delay, env: ["K": "p0"])
            XCTAssertEqual(
                opens(path, passphrase: "p0"), rows, "round \(round): the passphrase opens the complete database")
            // A rotation left pending is settled by the next change of a slot (or finished by the next rotation).
            let pending =
                (try? String(contentsOfFile: KeySlots.slotFilePath(forDatabaseAt: path), encoding: .utf8))?
                .contains("pendingGeneration") ?? false
            outcomes[killed ? (pending ? "killed, pending" : "killed, settled") : "finished", default: 0] += 1
        }
        try KeySlots.changeSlot(
            of: path, from: .passphrase("p0"), to: .passphrase("p1"), kdf: .pbkdf2SHA512(iterations: 64_000))
        XCTAssertEqual(opens(path, passphrase: "p1"), rows)
        XCTAssertFalse(
            try String(contentsOfFile: KeySlots.slotFilePath(forDatabaseAt: path), encoding: .utf8).contains(
                "pendingGeneration"))
        print("kill during rekey --data-key outcomes: \(outcomes)")
    }
}
