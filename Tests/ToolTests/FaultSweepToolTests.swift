import FMDB
import Foundation
import TestSupport
import XCTest

/// Every file-system call a command makes fails in turn (EIO once, ENOSPC once, a disk that stays full) or
/// is the moment the process is killed (Tests/FaultInjection/fault_shim.c, through `LD_PRELOAD`). After each
/// run the file must be in the old state or the new one, opening with the key the exit code names, with
/// every row; and the message must name the real cause.
final class FaultSweepToolTests: ToolTestCase {
    /// What the rekey's exit status says about the file.
    enum Claim {
        case newKey, oldKey, eitherKey
    }

    func claim(ofRekeyStatus status: Int32, killed: Bool) -> Claim? {
        if killed { return .eitherKey }
        switch status {
        case 0, 3: return .newKey
        case 74, 75, 1: return .oldKey
        case 4: return .eitherKey
        default: return nil
        }
    }

    /// A sweep of `fmdb-cipher rekey` (raw keys: no KDF, so a run is fast) in one journal mode. With `backup`,
    /// `rekey --backup` (the library's `FMDatabaseCopy.rekeyWithBackup`): besides the rule for the file, a
    /// backup left at its path is complete under the old key, and exit 0 or 3 means it is there.
    func sweepRekey(journalMode: String, backup: Bool = false) throws {
        let shim = try FaultShim.shared()
        let rows: Int32 = 3
        let base = try makeEncrypted("base-\(journalMode).db", rows: Int(rows), payload: 200)
        do {
            let db = FMDatabase(path: base)
            XCTAssertTrue(db.open())
            var hex = Self.rawKey
            try db.setKey(
                using: hex.withUTF8 { try RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) })
            XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = \(journalMode)"), journalMode)
            db.close()
        }
        let work = path("work-\(journalMode)\(backup ? "-backup" : "")")
        let file = work + "/db"
        let backupFile = work + "/db.bak"
        func reset() throws {
            try? FileManager.default.removeItem(atPath: work)
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: base, toPath: file)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["OLD"] = Self.rawKey
        environment["NEW"] = Self.otherRawKey
        let arguments =
            [
                "rekey", file, "--kdf", "raw", "--key-env", "OLD", "--new-kdf", "raw", "--new-key-env", "NEW",
                "--busy-timeout", "0.2", "--quiet",
            ] + (backup ? ["--backup", backupFile] : [])
        try reset()
        let plan = try shim.plan(tool, arguments, folder: work, environment: environment)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        XCTAssertGreaterThan(plan.calls.count, 5, "the rekey writes the journal, the file and syncs: \(plan.calls)")
        let folder = URL(fileURLWithPath: work).resolvingSymlinksInPath().path
        XCTAssertTrue(
            plan.calls.last.map { $0.operation.hasSuffix("sync") && $0.path == folder } ?? false,
            "the rekey's last step syncs the directory (the journal's removal): \(plan.calls.suffix(3))")
        if backup { XCTAssertEqual(rowCount(backupFile, rawKey: Self.rawKey), rows, "the backup, without faults") }

        var failures: [String] = []
        for mode in FaultShim.Mode.allCases {
            for point in 1...plan.calls.count {
                try reset()
                let result = try shim.run(
                    tool, arguments, folder: work, at: point, mode: mode, environment: environment)
                let killed =
                    mode == .kill && result.status == 128 + SIGKILL || result.status == -SIGKILL
                    || result.status == SIGKILL
                let place =
                    "\(mode) at \(point) (\(plan.calls[point - 1])): exit \(result.status) \(result.stderr.prefix(200))"
                let old = rowCount(file, rawKey: Self.rawKey)
                let new = rowCount(file, rawKey: Self.otherRawKey)
                // One key, and only one, opens a complete file, whatever happened.
                guard (old == rows) != (new == rows), old == nil || old == rows, new == nil || new == rows else {
                    failures.append(
                        "\(place): old key \(String(describing: old)) rows, new key \(String(describing: new)) rows")
                    continue
                }
                guard let claim = claim(ofRekeyStatus: result.status, killed: killed) else {
                    failures.append("\(place): an exit status no fault should give")
                    continue
                }
                switch claim {
                case .newKey where new != rows, .oldKey where old != rows:
                    failures.append("\(place): the exit status names the other key")
                default: break
                }
                if backup {
                    // A backup is published whole (or not at all), under the old key; a rekey that went
                    // ahead had one.
                    // (Opened only when there: opening a missing path would create it.)
                    let there = FileManager.default.fileExists(atPath: backupFile)
                    let saved = there ? rowCount(backupFile, rawKey: Self.rawKey) : nil
                    if there, saved != rows {
                        failures.append("\(place): a backup that does not open whole with the old key")
                    }
                    // Whatever the exit code: a database the new key opens had its backup, never removed after.
                    if new == rows, saved != rows {
                        failures.append("\(place): the new key opens the database, and its backup is gone")
                    }
                }
                // Nothing of this run stays where the next one trips on it: besides the database (and the backup),
                // only SQLite's own side files it could not remove, with nothing SQLite would replay (an empty
                // WAL, a journal that is not hot) and a -shm SQLite rebuilds.
                if !killed {
                    let left = ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter { name in
                        let head = FileManager.default.contents(atPath: work + "/" + name)?.prefix(4) ?? Data()
                        switch name {
                        case "db", "db.bak", "db-shm": return false
                        case "db-wal": return !head.isEmpty
                        case "db-journal": return head == Data([0xD9, 0xD5, 0x05, 0xF9])
                        default: return true
                        }
                    }
                    if !left.isEmpty { failures.append("\(place): left \(left)") }
                }
                // Done, but its last step, the tool's sync of the directory (which makes the removal of the journal
                // or WAL durable), failed: said, as a change that may not survive a power loss. In a disk that stays
                // full that sync always fails after the fault.
                let lastSync =
                    point == plan.calls.count && plan.calls[point - 1].operation.hasSuffix("sync")
                    && plan.calls[point - 1].path == folder
                if !killed, result.status == 0 || result.status == 3, mode == .full || lastSync,
                    !result.stderr.lowercased().contains("power loss")
                {
                    failures.append("\(place): the directory was not synced, and nothing says a power loss may undo it")
                }
                // The message names the cause: a one-off I/O error or a full disk, never another process's lock.
                if !killed, result.status != 0, result.status != 3 {
                    let text = result.stderr.lowercased()
                    if text.contains("locked") || text.contains("another connection")
                        || text.contains("another process")
                    {
                        failures.append("\(place): blames a lock; no other process existed")
                    }
                    if text.contains("neither the old nor the new") || text.contains("restore it from a backup") {
                        failures.append("\(place): says neither key opens")
                    }
                }
            }
        }
        XCTAssertTrue(
            failures.isEmpty,
            "\(failures.count) of \(FaultShim.Mode.allCases.count * plan.calls.count) runs:\n"
                + failures.prefix(30).joined(separator: "\n"))
    }

    /// A sweep of a command that writes a new file DEST in `work` from a source outside it: after every fault
    /// DEST is absent or complete, never partial; exit 0 only when it is complete and durable (its
    /// directory synced), 74 for every injected I/O error or full disk; after a kill, the next run (no fault)
    /// succeeds and leaves nothing of the killed run behind (a decrypt's partial copy is plaintext).
    /// `outputs`: the files the command makes in `work` (DEST and, for a slotted copy, DEST-keyslots): all or
    /// none of them after a run that exited. `kept`: files the command keeps there on purpose, whatever happens
    /// (the slot file's lock, `DEST-keyslots.lock`, which the next run takes as it is).
    func sweepCopy(
        _ name: String, arguments: (String) -> [String], opens: (String) -> Int32?, rows: Int32,
        outputs: [String] = ["dest.db"], kept: [String] = [], environment extra: [String: String] = [:]
    ) throws {
        let shim = try FaultShim.shared()
        let work = path("copy-\(name)")
        let dest = work + "/dest.db"
        func reset() throws {
            try? FileManager.default.removeItem(atPath: work)
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["OLD"] = Self.rawKey
        environment["NEW"] = Self.otherRawKey
        environment.merge(extra) { _, new in new }
        try reset()
        let plan = try shim.plan(tool, arguments(dest), folder: work, environment: environment)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        XCTAssertEqual(opens(dest), rows, "\(name) makes a complete copy without faults")
        XCTAssertTrue(
            plan.calls.contains { $0.operation.hasPrefix("fsync") || $0.operation.hasPrefix("fdatasync") },
            "\(name) syncs: \(plan.calls)")
        // DEST's directory is synced after DEST appears in it: a copy reported done survives a power loss.
        let folder = URL(fileURLWithPath: work).resolvingSymlinksInPath().path
        let published = plan.calls.lastIndex {
            ["rename", "renameat", "renameat2", "link", "linkat"].contains($0.operation)
                && URL(fileURLWithPath: $0.path).resolvingSymlinksInPath().path == folder + "/dest.db"
        }
        XCTAssertNotNil(published, "\(name) publishes DEST by a rename or link: \(plan.calls)")
        if let published {
            XCTAssertTrue(
                plan.calls[(published + 1)...].contains { $0.operation.hasSuffix("sync") && $0.path == folder },
                "\(name) syncs DEST's directory after DEST appears: \(plan.calls[published...])")
        }
        var failures: [String] = []
        for mode in [FaultShim.Mode.eio, .full, .kill] {
            for point in 1...plan.calls.count {
                try reset()
                let result = try shim.run(
                    tool, arguments(dest), folder: work, at: point, mode: mode, environment: environment)
                let killed =
                    mode == .kill
                    && (result.status == 128 + SIGKILL || result.status == SIGKILL || result.status == -SIGKILL)
                let place =
                    "\(name): \(mode) at \(point) (\(plan.calls[point - 1])): exit \(result.status) "
                    + "\(result.stderr.prefix(160))"
                let exists = FileManager.default.fileExists(atPath: dest)
                let copied = exists ? opens(dest) : nil
                if exists, copied != rows {
                    failures.append("\(place): a partial DEST (\(String(describing: copied)) rows)")
                }
                let present = outputs.filter { FileManager.default.fileExists(atPath: work + "/" + $0) }
                if !killed {
                    if result.status == 0, copied != rows {
                        failures.append("\(place): exit 0 without a complete DEST")
                    }
                    if result.status != 0, !present.isEmpty {
                        failures.append("\(place): failed, but \(present) there")
                    }
                    if result.status != 0, result.status != 74 {
                        failures.append("\(place): an injected I/O fault is not exit 74")
                    }
                    let left = ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter {
                        !outputs.contains($0) && !kept.contains($0)
                    }
                    if !left.isEmpty { failures.append("\(place): left \(left)") }
                } else {
                    // The next run cleans up what the killed one left, and makes the copy.
                    for output in outputs { try? FileManager.default.removeItem(atPath: work + "/" + output) }
                    let again = try runProcess(tool, arguments(dest), input: "", environment: environment)
                    let left = ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter {
                        !outputs.contains($0) && !kept.contains($0)
                    }
                    if again.status != 0 || opens(dest) != rows || !left.isEmpty {
                        failures.append(
                            "\(place): the next run: exit \(again.status), left \(left) \(again.stderr.prefix(160))")
                    }
                }
            }
        }
        XCTAssertTrue(
            failures.isEmpty,
            "\(failures.count) of \(3 * plan.calls.count) runs:\n" + failures.prefix(30).joined(separator: "\n"))
    }

    func testCopiesUnderEveryFaultAreAbsentOrCompleteAndSaySo() throws {
        let rows: Int32 = 3
        let encrypted = try makeEncrypted("copy-src.db", rows: Int(rows), payload: 200)
        let plain = try makePlaintext("copy-plain.db", rows: Int(rows), payload: 200)
        try sweepCopy(
            "export",
            arguments: {
                [
                    "export", encrypted, $0, "--kdf", "raw", "--key-env", "OLD", "--new-kdf", "raw",
                    "--new-key-env", "NEW", "--quiet",
                ]
            },
            opens: { rowCount($0, rawKey: Self.otherRawKey) }, rows: rows)
        try sweepCopy(
            "decrypt", arguments: { ["decrypt", encrypted, $0, "--kdf", "raw", "--key-env", "OLD", "--quiet"] },
            opens: { rowCount($0, rawKey: nil) }, rows: rows)
        try sweepCopy(
            "encrypt", arguments: { ["encrypt", plain, $0, "--kdf", "raw", "--key-env", "NEW", "--quiet"] },
            opens: { rowCount($0, rawKey: Self.otherRawKey) }, rows: rows)
    }

    /// The copies added since the first sweep: `export --new-kdf slot-raw` (DEST and DEST-keyslots, a pair: both
    /// or neither) and `keys export-raw --output FILE` (the data key in a private file, published whole or not
    /// at all).
    func testSlottedExportAndTheDataKeyFileUnderEveryFaultAreAbsentOrCompleteAndSaySo() throws {
        let rows: Int32 = 3
        let encrypted = try makeEncrypted("copy-src-slots.db", rows: Int(rows), payload: 200)
        var bytes = Data()
        var index = Self.otherRawKey.startIndex
        while index < Self.otherRawKey.endIndex {
            let next = Self.otherRawKey.index(index, offsetBy: 2)
            bytes.append(UInt8(Self.otherRawKey[index..<next], radix: 16) ?? 0)
            index = next
        }
        let secret = try KeySlotSecret.rawKey(bytes)
        try sweepCopy(
            "export-slots",
            arguments: {
                [
                    "export", encrypted, $0, "--kdf", "raw", "--key-env", "OLD", "--new-kdf", "slot-raw",
                    "--new-key-env", "NEW", "--quiet",
                ]
            },
            opens: { file in
                let db = FMDatabase(path: file)
                db.logsErrors = false
                guard db.open(withFlags: SQLITE_OPEN_READONLY) else { return nil }
                defer { db.close() }
                guard (try? db.setKey(using: KeySlotKeyProvider(secret: secret))) != nil else { return nil }
                return db.int(forQuery: "select count(*) from t")
            }, rows: rows, outputs: ["dest.db", "dest.db-keyslots"], kept: ["dest.db-keyslots.lock"])

        // A slotted database outside the swept folder, and the data key its slot unlocks.
        let slotted = path("export-raw-src.db")
        let created = try run(
            ["keys", "init", slotted, "--kdf", "slot-raw", "--key-env", "A"], env: ["A": Self.rawKey])
        XCTAssertEqual(created.status, 0, created.stderr)
        let printed = try run(
            [
                "keys", "export-raw", slotted, "--kdf", "slot-raw", "--key-env", "A",
                "--i-understand-this-reveals-the-data-key",
            ],
            env: ["A": Self.rawKey])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        let expected = printed.stdout
        XCTAssertEqual(expected.count, 65, "64 hexadecimal digits and a newline")
        try sweepCopy(
            "export-raw",
            arguments: {
                [
                    "keys", "export-raw", slotted, "--kdf", "slot-raw", "--key-env", "A",
                    "--i-understand-this-reveals-the-data-key", "--output", $0,
                ]
            },
            opens: { file in
                (try? String(contentsOfFile: file, encoding: .utf8)) == expected ? 1 : 0
            }, rows: 1, environment: ["A": Self.rawKey])
    }

    /// `migrate` in place of a SQLCipher 3 file in WAL mode, under every fault: SRC keeps opening with its key
    /// and every row whatever happens (a kill between the switch out of WAL and the rename included); exit 0
    /// only when SRC is the SQLCipher 4 copy; a failure leaves SRC in SQLCipher 3's format and nothing beside
    /// it; after a kill the next run finishes the migration and removes the staged copy the killed run left.
    func testMigrateInPlaceUnderEveryFaultKeepsSRCOpenableWithItsKey() throws {
        guard CipherFormat.v4.isSupportedByLinkedSQLCipher else { throw XCTSkip("migrate needs SQLCipher 4 linked") }
        let shim = try FaultShim.shared()
        let rows: Int32 = 3
        let current = try makeEncrypted("migrate-src.db", rows: Int(rows), payload: 200)
        let base = path("migrate-v3.db")
        let exported = try run(
            [
                "export", current, base, "--kdf", "raw", "--key-env", "K", "--new-key-env", "K", "--format", "3",
                "--quiet",
            ],
            env: ["K": Self.rawKey])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        do {
            let db = FMDatabase(path: base)
            XCTAssertTrue(db.open())
            var hex = Self.rawKey
            try db.setKey(
                using: hex.withUTF8 { try RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) })
            XCTAssertEqual(db.string(forQuery: "PRAGMA journal_mode = WAL"), "wal")
            db.close()
        }
        let work = path("migrate-work")
        let file = work + "/db"
        func reset() throws {
            try? FileManager.default.removeItem(atPath: work)
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: base, toPath: file)
        }
        func format() -> CipherFormat? {
            let db = FMDatabase(path: file)
            db.logsErrors = false
            guard db.open() else { return nil }
            defer { db.close() }
            var hex = Self.rawKey
            let provider = hex.withUTF8 {
                try? RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0)))
            }
            guard let provider, (try? db.setKey(using: provider)) != nil else { return nil }
            return db.cipherFormat
        }
        func staged() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter { $0.contains("fmdb-cipher") }
        }
        var environment = ProcessInfo.processInfo.environment
        environment["OLD"] = Self.rawKey
        let arguments = ["migrate", file, "--kdf", "raw", "--key-env", "OLD", "--quiet"]
        try reset()
        let plan = try shim.plan(tool, arguments, folder: work, environment: environment)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        XCTAssertEqual(format(), .v4)
        XCTAssertEqual(rowCount(file, rawKey: Self.rawKey), rows)
        XCTAssertTrue(
            plan.calls.contains { $0.operation.hasPrefix("rename") && $0.path.hasSuffix("/db") },
            "SRC is replaced by a rename: \(plan.calls)")
        var failures: [String] = []
        for mode in [FaultShim.Mode.eio, .full, .kill] {
            for point in 1...plan.calls.count {
                try reset()
                let result = try shim.run(
                    tool, arguments, folder: work, at: point, mode: mode, environment: environment)
                let killed =
                    mode == .kill
                    && (result.status == 128 + SIGKILL || result.status == SIGKILL || result.status == -SIGKILL)
                let place =
                    "migrate: \(mode) at \(point) (\(plan.calls[point - 1])): exit \(result.status) "
                    + "\(result.stderr.prefix(160))"
                let count = rowCount(file, rawKey: Self.rawKey)
                if count != rows {
                    failures.append("\(place): SRC opens with its key with \(String(describing: count)) rows")
                }
                if killed {
                    // The next run (no fault) removes what the killed one left and migrates.
                    let again = try runProcess(tool, arguments, input: "", environment: environment)
                    if again.status != 0 || format() != .v4 || rowCount(file, rawKey: Self.rawKey) != rows
                        || !staged().isEmpty
                    {
                        failures.append(
                            "\(place): the next run: exit \(again.status), left \(staged()) \(again.stderr.prefix(160))"
                        )
                    }
                    continue
                }
                if result.status == 0, format() != .v4 { failures.append("\(place): exit 0, SRC not migrated") }
                if result.status != 0, format() != .v3 { failures.append("\(place): failed, but SRC changed format") }
                if result.status != 0, ![74, 75].contains(result.status) {
                    failures.append("\(place): an injected I/O fault is neither exit 74 nor 75")
                }
                if !staged().isEmpty { failures.append("\(place): left \(staged())") }
            }
        }
        XCTAssertTrue(
            failures.isEmpty,
            "\(failures.count) of \(3 * plan.calls.count) runs:\n" + failures.prefix(30).joined(separator: "\n"))
    }

    func testRekeyUnderEveryFaultLeavesOneKeyAndSaysWhich() throws {
        try sweepRekey(journalMode: "delete")
    }

    func testRekeyInWALModeUnderEveryFaultLeavesOneKeyAndSaysWhich() throws {
        try sweepRekey(journalMode: "wal")
    }

    func testRekeyWithBackupUnderEveryFaultLeavesOneKeyAndAWholeBackup() throws {
        try sweepRekey(journalMode: "wal", backup: true)
    }
}
