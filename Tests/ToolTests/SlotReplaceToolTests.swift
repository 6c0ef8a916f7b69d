import FMDB
import Foundation
import TestSupport
import XCTest

/// `--force` over a DEST that has key slots: DEST and DEST-keyslots are a pair, and a copy that replaces them
/// never leaves a DEST beside a slot file that is not its own, nor loses the old pair before the new one is in
/// place. Each move of the commit is killed (SIGKILL) or made to fail (EBUSY) in turn with strace's syscall
/// injection (skipped where strace is missing); a slot file that cannot be moved (immutable, root) fails
/// without strace. A copy without slots removes the slot file of the DEST it replaces.
final class SlotReplaceToolTests: ToolTestCase {
    let cheap = KeySlotKDF.unsafePBKDF2SHA512(iterations: 1_000)
    var source = ""
    var sourceSlots = Data()
    var oldDest = Data()
    var oldSlots = Data()
    var dest: String { path("dest.db") }

    func bytes(_ file: String) -> Data? { FileManager.default.contents(atPath: file) }
    func slots(_ file: String) -> String { KeySlots.slotFilePath(forDatabaseAt: file) }
    func exists(_ file: String) -> Bool {
        var status = stat()
        return lstat(file, &status) == 0
    }

    /// SRC: slotted, passphrase "alpha", 50 rows. DEST: another slotted database, passphrase "old", 7 rows.
    func makeSourceAndOldDest() throws {
        source = path("src.db")
        try makeSlotted(source, passphrase: "alpha", rows: 50)
        sourceSlots = try XCTUnwrap(bytes(slots(source)))
        try resetDest()
    }

    func makeSlotted(_ file: String, passphrase: String, rows: Int) throws {
        try KeySlots.createDatabase(at: file, secret: .passphrase(passphrase), kdf: cheap)
        let queue = try FMDatabaseQueue(path: file, keyProvider: KeySlotKeyProvider(secret: .passphrase(passphrase)))
        try queue.inDatabase { db in
            try db.executeUpdate("create table t (id integer primary key, v text)", values: nil)
            for i in 0..<rows { try db.executeUpdate("insert into t (v) values (?)", values: ["row \(i)"]) }
        }
        queue.close()
    }

    /// Removes whatever a run left at DEST (private directories included) and makes the old slotted DEST again.
    func resetDest() throws {
        for name in entries() where name.hasPrefix("dest.db") || name.hasPrefix(".dest.db.fmdb-cipher-") {
            try FileManager.default.removeItem(atPath: path(name))
        }
        try makeSlotted(dest, passphrase: "old", rows: 7)
        oldDest = try XCTUnwrap(bytes(dest))
        oldSlots = try XCTUnwrap(bytes(slots(dest)))
    }

    /// The rows of `t` when `file` opens through the slot file beside it with `passphrase`; nil otherwise.
    func slottedRows(_ file: String, _ passphrase: String) -> Int32? {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard exists(file), db.open(withFlags: SQLITE_OPEN_READONLY) else { return nil }
        defer { db.close() }
        guard (try? db.setKey(using: KeySlotKeyProvider(secret: .passphrase(passphrase)))) != nil,
            let rs = db.executeQuery("select count(*) from t"), rs.next()
        else { return nil }
        return rs.int(forColumnIndex: 0)
    }

    func privateDirectories() -> [String] {
        entries().filter { $0.hasPrefix(".dest.db.fmdb-cipher-") }.map { path($0) }
    }

    /// A copy that replaces DEST: `slotted` copies carry SRC's slot file; the others make a plaintext DEST.
    struct Copy {
        let name: String
        let arguments: [String]
        let slotted: Bool
    }

    var copies: [Copy] {
        [
            Copy(
                name: "export --kdf slot",
                arguments: ["export", source, dest, "--kdf", "slot", "--key-env", "K", "--force", "--quiet"],
                slotted: true),
            Copy(
                name: "decrypt",
                arguments: ["decrypt", source, dest, "--kdf", "slot", "--key-env", "K", "--force", "--quiet"],
                slotted: false),
        ]
    }

    /// Whether DEST is the new copy, with its own slot file (slotted) or none (plaintext).
    func newCopyAtDest(_ copy: Copy) -> Bool {
        // Checked first: opening a missing DEST would create it.
        guard exists(dest) else { return false }
        if copy.slotted { return slottedRows(dest, "alpha") == 50 && bytes(slots(dest)) == sourceSlots }
        return rowCount(dest, rawKey: nil) == 50 && !exists(slots(dest))
    }

    /// The rule: a DEST that exists is the old pair or the new one, never one beside the other's slot file; until
    /// the new copy is at DEST, the old pair is whole (at DEST, or as old.db + old.db-keyslots in the private
    /// directory); a DEST-keyslots without DEST is the old or the new slot file.
    func assertMatchingPairs(_ round: String, file: StaticString = #filePath, line: UInt = #line) {
        let copy = copies.first { round.hasPrefix($0.name) } ?? copies[0]
        let oldAtDest = bytes(dest) == oldDest && bytes(slots(dest)) == oldSlots && slottedRows(dest, "old") == 7
        let newAtDest = newCopyAtDest(copy)
        if exists(dest) {
            XCTAssertTrue(
                oldAtDest != newAtDest, "\(round): DEST is the old pair or the new one", file: file, line: line)
        } else if let slotFile = bytes(slots(dest)) {
            XCTAssertTrue(
                slotFile == oldSlots || (copy.slotted && slotFile == sourceSlots), "\(round): DEST-keyslots",
                file: file, line: line)
        }
        if !newAtDest, !oldAtDest {
            let aside = privateDirectories().contains {
                slottedRows($0 + "/old.db", "old") == 7 && bytes($0 + "/old.db") == oldDest
            }
            XCTAssertTrue(aside, "\(round): the old pair is whole in the private directory", file: file, line: line)
        }
    }

    func strace() throws -> String {
        guard let strace = which("strace") else { throw XCTSkip("strace is not installed: no syscall injection") }
        let probe = try runProcess(strace, ["-o", "/dev/null", "-e", "inject=getpid:error=EPERM", "/bin/true"])
        guard probe.status == 0 else { throw XCTSkip("strace cannot trace here: \(probe.stderr)") }
        return strace
    }

    /// The calls of a commit that touch DEST or DEST-keyslots (link, rename, renameat2, unlink), each as its
    /// syscall and its number among the calls of that syscall (strace's `when=` counts per syscall), found by
    /// tracing one run: the test follows the code's moves, whatever their order.
    func commitCalls(_ strace: String, _ copy: Copy) throws -> [(syscall: String, number: Int)] {
        let log = path("strace.log")
        let traced = try runTool(
            copy.arguments, env: ["K": "alpha"],
            wrapper: [strace, "-f", "-o", log, "-e", "trace=link,rename,renameat2,unlink"])
        XCTAssertEqual(traced.status, 0, traced.stderr)
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        try FileManager.default.removeItem(atPath: log)
        try resetDest()
        var counts: [String: Int] = [:]
        var calls: [(String, Int)] = []
        let names = ["\"\(dest)\"", "\"\(slots(dest))\""]
        for line in lines {
            // "PID syscall(args) = result"; a resumed half ("<... syscall resumed>") is not a new call.
            let text = line.drop { $0.isNumber || $0 == " " }
            guard let open = text.firstIndex(of: "("), !text.hasPrefix("<") else { continue }
            let syscall = String(text[..<open])
            counts[syscall, default: 0] += 1
            if names.contains(where: { text.contains($0) }) { calls.append((syscall, counts[syscall, default: 0])) }
        }
        return calls
    }

    func runInjected(_ strace: String, _ copy: Copy, syscall: String, when: String, action: String) throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        try runTool(
            copy.arguments, env: ["K": "alpha"],
            wrapper: [strace, "-f", "-o", "/dev/null", "-e", "inject=\(syscall):\(action):when=\(when)"])
    }

    func testAKillAtEveryMoveOfAForcedCopyOverASlottedDestLeavesMatchingPairs() throws {
        let strace = try strace()
        try makeSourceAndOldDest()
        for copy in copies {
            let calls = try commitCalls(strace, copy)
            // Slotted: link, renameat2, rename, rename; without slots: link, renameat2, unlink, rename.
            XCTAssertGreaterThanOrEqual(calls.count, 4, "\(copy.name): \(calls)")
            for (syscall, number) in calls {
                let round = "\(copy.name), SIGKILL at \(syscall) #\(number)"
                let result = try runInjected(
                    strace, copy, syscall: syscall, when: String(number), action: "signal=KILL")
                XCTAssertEqual(result.status, SIGKILL, "\(round): \(result.stderr)")
                assertMatchingPairs(round)
                try resetDest()
            }
        }
    }

    func testAFailedMoveOfAForcedCopyOverASlottedDestPutsTheOldPairBack() throws {
        let strace = try strace()
        try makeSourceAndOldDest()
        for copy in copies {
            let calls = try commitCalls(strace, copy)
            XCTAssertGreaterThanOrEqual(calls.count, 4, "\(copy.name): \(calls)")
            for (syscall, number) in calls {
                let round = "\(copy.name), EBUSY at \(syscall) #\(number)"
                let result = try runInjected(
                    strace, copy, syscall: syscall, when: String(number), action: "error=EBUSY")
                if syscall == "link", result.status == 0 {
                    // The hard link is optional (no hard links: the old slot file is moved instead).
                    XCTAssertTrue(newCopyAtDest(copy), round)
                } else {
                    XCTAssertEqual(result.status, 74, "\(round): \(result.stderr)")
                    XCTAssertTrue(result.stderr.contains("are as they were"), "\(round): \(result.stderr)")
                    XCTAssertEqual(bytes(dest), oldDest, round)
                    XCTAssertEqual(bytes(slots(dest)), oldSlots, round)
                    XCTAssertEqual(slottedRows(dest, "old"), 7, round)
                }
                XCTAssertEqual(privateDirectories(), [], "\(round): nothing of the run stays")
                try resetDest()
            }
        }
        // The new database cannot be moved, and the old pair cannot be put back either (every renameat2 after
        // the first fails): the private directory with the old pair stays, and the error names it.
        let kept = try runProcess(
            strace,
            [
                "-f", "-o", "/dev/null", "-e", "inject=rename:error=EBUSY:when=2", "-e",
                "inject=renameat2:error=EBUSY:when=2+", tool,
            ] + copies[0].arguments,
            environment: ProcessInfo.processInfo.environment.merging(["K": "alpha"]) { _, new in new })
        XCTAssertEqual(kept.status, 74, kept.stderr)
        XCTAssertTrue(kept.stderr.contains("could not put back"), kept.stderr)
        let directory = try XCTUnwrap(privateDirectories().first)
        XCTAssertTrue(kept.stderr.contains(URL(fileURLWithPath: directory).lastPathComponent + "/old.db"), kept.stderr)
        XCTAssertEqual(bytes(directory + "/old.db"), oldDest)
        XCTAssertEqual(slottedRows(directory + "/old.db", "old"), 7, "the old pair opens where it is")
        XCTAssertFalse(exists(dest))
    }

    /// Without strace: an immutable DEST-keyslots (root, chattr +i) cannot be moved aside; the old DEST, already
    /// moved, is put back, and nothing of the run stays.
    func testASlotFileThatCannotBeMovedLeavesTheOldPairAsItWas() throws {
        guard getuid() == 0, let chattr = which("chattr") else { throw XCTSkip("needs root and chattr") }
        try makeSourceAndOldDest()
        guard try runProcess(chattr, ["+i", slots(dest)]).status == 0 else {
            throw XCTSkip("no immutable files on this file system")
        }
        defer { _ = try? runProcess(chattr, ["-i", slots(dest)]) }
        for copy in copies {
            let result = try run(copy.arguments, env: ["K": "alpha"])
            XCTAssertEqual(result.status, 74, "\(copy.name): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("are as they were"), result.stderr)
            XCTAssertEqual(bytes(dest), oldDest, copy.name)
            XCTAssertEqual(bytes(slots(dest)), oldSlots, copy.name)
            XCTAssertEqual(slottedRows(dest, "old"), 7, copy.name)
            XCTAssertEqual(privateDirectories(), [], copy.name)
        }
    }

    /// A copy without slots (decrypt, export under a new key, plain encrypt) replacing a slotted DEST removes
    /// DEST-keyslots and says so; without --force, a DEST-keyslots alone is refused (exit 73), as DEST is.
    func testACopyWithoutSlotsRemovesTheSlotFileOfTheDestItReplaces() throws {
        try makeSourceAndOldDest()
        let plain = try makePlaintext()
        let commands: [(String, [String], [String: String])] = [
            ("decrypt", ["decrypt", source, dest, "--kdf", "slot", "--key-env", "K"], ["K": "alpha"]),
            (
                "export --new-key",
                ["export", source, dest, "--kdf", "slot", "--key-env", "K", "--new-key-env", "N", "--new-kdf", "raw"],
                ["K": "alpha", "N": Self.rawKey]
            ),
            ("encrypt", ["encrypt", plain, dest, "--kdf", "raw", "--key-env", "N"], ["N": Self.rawKey]),
        ]
        for (name, arguments, environment) in commands {
            let forced = try run(arguments + ["--force", "--quiet"], env: environment)
            XCTAssertEqual(forced.status, 0, "\(name): \(forced.stderr)")
            XCTAssertTrue(forced.stderr.contains("removed \(slots(dest))"), "\(name): \(forced.stderr)")
            XCTAssertFalse(exists(slots(dest)), name)
            XCTAssertEqual(rowCount(dest, rawKey: name == "decrypt" ? nil : Self.rawKey), 50, name)
            XCTAssertEqual(privateDirectories(), [], name)
            // A slot file alone at DEST (a leftover): refused without --force, before any work.
            try FileManager.default.removeItem(atPath: dest)
            try oldSlots.write(to: URL(fileURLWithPath: slots(dest)))
            let refused = try run(arguments, env: environment)
            XCTAssertEqual(refused.status, 73, "\(name): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("dest.db-keyslots"), refused.stderr)
            XCTAssertFalse(exists(dest), name)
            XCTAssertEqual(bytes(slots(dest)), oldSlots, name)
            try resetDest()
        }
    }
}
