import FMDB
import Foundation
import TestSupport
import XCTest

/// The key-slot commands under every fault: each file-system call `keys init`, `keys change`, `keys add`,
/// `keys remove` and `rekey --data-key` make fails in turn (EIO once, ENOSPC once, a disk that stays full)
/// or is the moment the process is killed (Tests/FaultInjection/fault_shim.c, through `LD_PRELOAD`).
/// After each run the database and its slot file must be in the old state or the new one, opening through
/// the slots the exit code names, with every row; and the message must name the real cause. Raw-key slots
/// (no KDF), so a run costs a process start.
final class FaultSweepKeysToolTests: ToolTestCase {
    static let first = String(repeating: "a1", count: 32)
    static let second = String(repeating: "b2", count: 32)
    static let rows: Int32 = 3

    /// A fault-free slotted database with `rows` rows: slot 1 opened by `first`, and slot 2 by `second`
    /// when `twoSlots`. Returns its path (its slot file beside it).
    func makeSlotted(_ name: String, twoSlots: Bool) throws -> String {
        let db = path(name)
        let created = try run(["keys", "init", db, "--kdf", "slot-raw", "--key-env", "A"], env: ["A": Self.first])
        XCTAssertEqual(created.status, 0, created.stderr)
        let connection = FMDatabase(path: db)
        XCTAssertTrue(connection.open(withFlags: SQLITE_OPEN_READWRITE))
        try connection.setKey(using: KeySlotKeyProvider(secret: secret(Self.first)))
        XCTAssertTrue(connection.executeUpdate("create table t (id integer primary key, v text)"))
        for i in 0..<Int(Self.rows) {
            XCTAssertTrue(connection.executeUpdate("insert into t (v) values (?)", "ROW-\(i)"))
        }
        connection.close()
        if twoSlots {
            let added = try run(
                [
                    "keys", "add", db, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "slot-raw", "--new-key-env",
                    "B",
                ],
                env: ["A": Self.first, "B": Self.second])
            XCTAssertEqual(added.status, 0, added.stderr)
        }
        return db
    }

    func secret(_ hex: String) -> KeySlotSecret {
        var bytes = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        // The test's constants are valid 32-byte keys.
        return (try? KeySlotSecret.rawKey(bytes)) ?? .passphrase("invalid")
    }

    /// What a query counts when `file` is opened through the slot `hex` opens (nil: it does not open).
    /// Never creates the file.
    func count(_ file: String, slot hex: String, query: String = "select count(*) from t") -> Int32? {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open(withFlags: SQLITE_OPEN_READWRITE) else { return nil }
        defer { db.close() }
        guard (try? db.setKey(using: KeySlotKeyProvider(secret: secret(hex)))) != nil,
            let rs = db.executeQuery(query), rs.next()
        else { return nil }
        return rs.int(forColumnIndex: 0)
    }

    /// Whether `file` opens with the data key `hex` itself (no slot).
    func opens(_ file: String, dataKey hex: String) -> Bool {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open(withFlags: SQLITE_OPEN_READWRITE) else { return false }
        defer { db.close() }
        var text = hex
        guard
            let provider = text.withUTF8({
                try? RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0)))
            }),
            (try? db.setKey(using: provider)) != nil,
            let rs = db.executeQuery("select count(*) from sqlite_master"), rs.next()
        else { return false }
        return true
    }

    func exists(_ file: String) -> Bool {
        var status = stat()
        return lstat(file, &status) == 0
    }

    /// What the exit status of a slot command says: the new state, the old one, or (killed) either.
    enum Claim {
        case new, old, either
    }

    struct Run {
        let mode: FaultShim.Mode
        let point: Int
        let call: FaultShim.Call
        let status: Int32
        let stderr: String
        let killed: Bool
        var place: String { "\(mode) at \(point) (\(call)): exit \(status) \(stderr.prefix(300))" }
    }

    /// The points of a sweep: every call, or when there are many, every call whose operation or file differs
    /// from the one before and every `stride`-th call, so each kind of operation is faulted.
    func points(_ calls: [FaultShim.Call], limit: Int = 60) -> [Int] {
        guard calls.count > limit else { return Array(1...calls.count) }
        let stride = max(1, calls.count / limit)
        return calls.indices.filter { index in
            index % stride == 0 || index == calls.count - 1 || index == 0
                || calls[index].operation != calls[index - 1].operation || calls[index].path != calls[index - 1].path
        }.map { $0 + 1 }
    }

    /// Runs `arguments` once without a fault (the plan), then with every mode at every point, resetting the
    /// folder before each run; `state` judges each run (a failure's description, or nil).
    func sweep(
        _ arguments: [String], environment extra: [String: String], folder work: String, reset: () throws -> Void,
        selecting select: (FaultShim.Mode, Int, [FaultShim.Call]) -> Bool = { _, _, _ in true },
        state: (Run, Claim) throws -> String?
    ) throws -> (runs: Int, failures: [String]) {
        let shim = try FaultShim.shared()
        var environment = ProcessInfo.processInfo.environment
        environment.merge(extra) { _, new in new }
        try reset()
        let plan = try shim.plan(tool, arguments, folder: work, environment: environment)
        XCTAssertEqual(plan.status, 0, plan.stderr)
        XCTAssertGreaterThan(plan.calls.count, 3, "\(plan.calls)")
        let directory = URL(fileURLWithPath: work).standardizedFileURL.resolvingSymlinksInPath().path
        var failures: [String] = []
        var runs = 0
        for mode in FaultShim.Mode.allCases {
            for point in points(plan.calls) where select(mode, point - 1, plan.calls) {
                try reset()
                let result = try shim.run(
                    tool, arguments, folder: work, at: point, mode: mode, environment: environment)
                runs += 1
                let killed =
                    mode == .kill
                    && (result.status == 128 + SIGKILL || result.status == -SIGKILL || result.status == SIGKILL)
                let run = Run(
                    mode: mode, point: point, call: plan.calls[point - 1], status: result.status, stderr: result.stderr,
                    killed: killed)
                let claim: Claim
                switch result.status {
                case _ where killed: claim = .either
                case 0: claim = .new
                case 74: claim = .old
                case 4 where arguments.contains("--data-key"): claim = .either
                default:
                    failures.append("\(run.place): an exit status no fault should give")
                    continue
                }
                if let failure = try state(run, claim) { failures.append("\(run.place): \(failure)") }
                // No temporary slot file stays after a run that exited (a kill's is the next slot command's).
                let temporaries = ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter {
                    $0.contains("-keyslots" + ".tmp-")
                }
                if !killed, !temporaries.isEmpty { failures.append("\(run.place): left \(temporaries)") }
                if !killed, result.status != 0 {
                    // The message names the cause: a one-off I/O error or a full disk, never a lock or a wrong key.
                    let text = result.stderr.lowercased()
                    for blame in [
                        "locked", "another process", "another connection", "wrong key", "neither", "does not open",
                    ]
                    where text.contains(blame) {
                        failures.append(
                            "\(run.place): says \"\(blame)\"; the secret was right and no other process existed")
                    }
                    // The slot file is written by the library itself, which names the errno; SQLite reports a
                    // failed sync or unlink as "disk I/O error" whatever the errno, which still names the class.
                    let cause =
                        mode == .eio || !run.call.path.contains("-keyslots")
                        ? ["input/output", "i/o", "no space", "full"]
                        : ["no space", "full"]
                    if !cause.contains(where: text.contains) {
                        failures.append("\(run.place): does not name the cause (\(cause.joined(separator: " or ")))")
                    }
                }
                // A directory sync that failed after the file was in place is said, not hidden.
                if !killed, result.status == 0, run.call.operation == "fsync", run.call.path == directory,
                    !result.stderr.lowercased().contains("power loss")
                {
                    failures.append(
                        "\(run.place): the directory sync failed, but nothing warns that the change may not survive a "
                            + "power loss"
                    )
                }
            }
        }
        return (runs, failures)
    }

    func report(_ outcome: (runs: Int, failures: [String]), file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(
            outcome.failures.isEmpty,
            "\(outcome.failures.count) of \(outcome.runs) runs:\n"
                + outcome.failures.prefix(30).joined(separator: "\n"), file: file, line: line)
    }

    /// The folder a sweep faults, filled by `copy` from the fault-free base before each run.
    func workFolder(_ name: String, base: String?) -> (folder: String, file: String, reset: () throws -> Void) {
        let work = path(name)
        let file = work + "/db"
        return (
            work, file,
            {
                try? FileManager.default.removeItem(atPath: work)
                try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
                if let base {
                    try FileManager.default.copyItem(atPath: base, toPath: file)
                    try FileManager.default.copyItem(
                        atPath: KeySlots.slotFilePath(forDatabaseAt: base),
                        toPath: KeySlots.slotFilePath(forDatabaseAt: file))
                }
            }
        )
    }

    // MARK: - The sweeps

    func testKeysInitUnderEveryFaultLeavesNothingOrAWholeDatabase() throws {
        let (work, file, reset) = workFolder("init", base: nil)
        let environment = ["A": Self.first]
        let arguments = ["keys", "init", file, "--kdf", "slot-raw", "--key-env", "A"]
        // A temporary slot file (`.db-keyslots.tmp-*`) left after the run: never after a run that exited, and
        // after a kill, gone once the next slot command on the path has run.
        func temporaries() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).filter {
                $0.contains("-keyslots" + ".tmp-")
            }
        }
        func initState(_ claim: Claim) throws -> String? {
            let opens = count(file, slot: Self.first, query: "select count(*) from sqlite_master") != nil
            switch claim {
            case .new:
                return opens ? nil : "exit 0, but the first slot does not open the database"
            case .old, .either:
                if exists(file) {
                    if claim == .old { return "a failure left a database at the path" }
                    return opens ? nil : "a database without a working slot file"
                }
                if exists(KeySlots.slotFilePath(forDatabaseAt: file)), claim == .old {
                    return "a failure left a slot file without its database"
                }
                // Nothing was made: keys init must work now (it cleans its own leftovers, temporary files too).
                let again = try self.run(arguments, env: environment)
                guard again.status == 0 else {
                    return "nothing at the path, but keys init again: exit \(again.status) \(again.stderr)"
                }
                if !temporaries().isEmpty { return "keys init again left \(temporaries())" }
                return count(file, slot: Self.first, query: "select count(*) from sqlite_master") != nil
                    ? nil : "keys init again: the slot does not open the database"
            }
        }
        let outcome = try sweep(arguments, environment: environment, folder: work, reset: reset) { run, claim in
            if let failure = try initState(claim) { return failure }
            guard run.killed, !temporaries().isEmpty else { return nil }
            // The killed run left a database and a temporary slot file: the next slot change removes it.
            let added = try self.run(
                [
                    "keys", "add", file, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "slot-raw",
                    "--new-key-env", "B",
                ],
                env: ["A": Self.first, "B": Self.second])
            guard added.status == 0, temporaries().isEmpty else {
                return "a temporary slot file stays after the next slot change: exit \(added.status), "
                    + "left \(temporaries()) \(added.stderr)"
            }
            return nil
        }
        report(outcome)
    }

    func testKeysChangeUnderEveryFaultLeavesTheOldOrTheNewSecret() throws {
        let base = try makeSlotted("change-base.db", twoSlots: false)
        let (work, file, reset) = workFolder("change", base: base)
        let arguments = [
            "keys", "change", file, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "slot-raw", "--new-key-env",
            "B",
        ]
        let outcome = try sweep(
            arguments, environment: ["A": Self.first, "B": Self.second], folder: work, reset: reset
        ) { _, claim in
            let old = count(file, slot: Self.first)
            let new = count(file, slot: Self.second)
            let oldState = old == Self.rows && new == nil
            let newState = new == Self.rows && old == nil
            switch claim {
            case .new where !newState, .old where !oldState, .either where !oldState && !newState:
                return
                    "claims \(claim); the old secret opens \(String(describing: old)) rows, the new "
                    + "\(String(describing: new))"
            default: return nil
            }
        }
        report(outcome)
    }

    func testKeysAddUnderEveryFaultAddsTheSlotOrNothing() throws {
        let base = try makeSlotted("add-base.db", twoSlots: false)
        let (work, file, reset) = workFolder("add", base: base)
        let arguments = [
            "keys", "add", file, "--kdf", "slot-raw", "--key-env", "A", "--new-kdf", "slot-raw", "--new-key-env", "B",
        ]
        let outcome = try sweep(
            arguments, environment: ["A": Self.first, "B": Self.second], folder: work, reset: reset
        ) { _, claim in
            let old = count(file, slot: Self.first)
            let new = count(file, slot: Self.second)
            guard old == Self.rows else { return "the existing slot opens \(String(describing: old)) rows" }
            switch claim {
            case .new where new != Self.rows, .old where new != nil, .either where new != nil && new != Self.rows:
                return "claims \(claim); the added secret opens \(String(describing: new)) rows"
            default: return nil
            }
        }
        report(outcome)
    }

    func testKeysRecoveryUnderEveryFaultAddsTheRecoverySlotOrNothing() throws {
        let base = try makeSlotted("recovery-base.db", twoSlots: false)
        let (work, file, reset) = workFolder("recovery", base: base)
        let arguments = ["keys", "recovery", file, "--kdf", "slot-raw", "--key-env", "A"]
        let outcome = try sweep(arguments, environment: ["A": Self.first], folder: work, reset: reset) { _, claim in
            let kept = count(file, slot: Self.first)
            guard kept == Self.rows else { return "the existing slot opens \(String(describing: kept)) rows" }
            let slots = (try? KeySlots.list(forDatabaseAt: file))?.count
            switch claim {
            case .new where slots != 2, .old where slots != 1, .either where slots != 1 && slots != 2:
                return "claims \(claim); the slot file has \(String(describing: slots)) slots"
            default: return nil
            }
        }
        report(outcome)
    }

    func testKeysRemoveUnderEveryFaultRevokesTheSlotOrNothing() throws {
        let base = try makeSlotted("remove-base.db", twoSlots: true)
        let (work, file, reset) = workFolder("remove", base: base)
        // Removed with its own secret: a revocation, read back from the file as written.
        let arguments = ["keys", "remove", file, "--kdf", "slot-raw", "--key-env", "B", "--slot", "2"]
        let outcome = try sweep(arguments, environment: ["B": Self.second], folder: work, reset: reset) { _, claim in
            let kept = count(file, slot: Self.first)
            let removed = count(file, slot: Self.second)
            guard kept == Self.rows else { return "the kept slot opens \(String(describing: kept)) rows" }
            switch claim {
            case .new where removed != nil, .old where removed != Self.rows,
                .either where removed != nil && removed != Self.rows:
                return "claims \(claim); the removed secret opens \(String(describing: removed)) rows"
            default: return nil
            }
        }
        report(outcome)
    }

    func testRekeyDataKeyUnderEveryFaultSaysWhichDataKeyTheDatabaseIsUnder() throws {
        let base = try makeSlotted("rotate-base.db", twoSlots: true)
        let oldDataKey = try KeySlots.withDataKeyHex(of: base, unlockingWith: secret(Self.first)) {
            String(decoding: $0, as: UTF8.self)
        }
        let (work, file, reset) = workFolder("rotate", base: base)
        let keyFile = path("second.key")
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: keyFile, contents: Data(Self.second.utf8), attributes: [.posixPermissions: 0o600]))
        let arguments = [
            "rekey", "--data-key", file, "--kdf", "slot-raw", "--key-env", "A", "--slot-key-file", keyFile, "--quiet",
        ]
        var finishedPending = 0
        // Every slot file write and directory sync under every fault. The database's own rekey transaction is the
        // library's rekey, swept at every point by FaultSweepToolTests; a failure inside it waits out the rekey's
        // busy timeout (5 s), so here it gets every kill and one EIO and one full disk per kind of call.
        let select: (FaultShim.Mode, Int, [FaultShim.Call]) -> Bool = { mode, index, calls in
            let call = calls[index]
            if mode == .kill || call.path.contains("-keyslots")
                || call.operation == "fsync" && !call.path.hasSuffix("/db")
                    && !call.path.hasSuffix("-journal")
            {
                return true
            }
            guard mode == .eio || mode == .full else { return false }
            let firstOfItsKind = !calls[..<index].contains { $0.operation == call.operation && $0.path == call.path }
            let firstOfTheTransaction = !calls[..<index].contains {
                !$0.path.contains("-keyslots") && $0.operation != "fsync"
            }
            return mode == .eio ? firstOfItsKind : firstOfTheTransaction
        }
        let outcome = try sweep(
            arguments, environment: ["A": Self.first], folder: work, reset: reset, selecting: select
        ) { run, claim in
            for hex in [Self.first, Self.second] {
                let rows = count(file, slot: hex)
                guard rows == Self.rows else { return "a slot opens \(String(describing: rows)) rows" }
            }
            let underOld = opens(file, dataKey: oldDataKey)
            switch claim {
            case .new where underOld: return "exit 0, but the database is still under the old data key"
            case .old where !underOld: return "says the old data key, but the rotation took"
            default: break
            }
            // The rotation reported done while its last slot file write failed: still pending, opening through
            // every slot (checked above), finished by the next slot change.
            let slots = (try? String(contentsOfFile: KeySlots.slotFilePath(forDatabaseAt: file), encoding: .utf8)) ?? ""
            if claim == .new, !run.killed,
                slots.range(of: #""pendingGeneration"\s*:\s*[0-9]"#, options: .regularExpression) != nil
            {
                finishedPending += 1
                if !run.stderr.lowercased().contains("pending") {
                    return "done with a pending slot file, and nothing says so"
                }
            }
            return nil
        }
        report(outcome)
        XCTAssertGreaterThan(finishedPending, 0, "no fault reached the rotation's last slot file write")
    }
}
