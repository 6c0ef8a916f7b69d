@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// SIGKILL at random moments: during writes (WAL and rollback journal), during a library rekey, during
/// `fmdb-cipher rekey`, and during encrypt / decrypt / export. Nothing acknowledged is lost, the file
/// always opens with exactly one key, and a copy's DEST is absent or complete. `Scripts/soak` runs many more.
final class KillTests: FMDBCipherTestCase {
    var helper: String!
    var tool: String!
    /// Deterministic "random" moments: the same kills every run.
    var rng = SeededGenerator(seed: 0x5EED)

    static let keyA = String(repeating: "a1", count: 32)
    static let keyB = String(repeating: "b2", count: 32)

    override func setUpWithError() throws {
        try super.setUpWithError()
        helper = try builtHelper()
        tool = try builtTool()
    }

    /// How many kills each scenario runs: FMDB_KILLS overrides (Scripts/soak sets hundreds).
    var kills: Int { ProcessInfo.processInfo.environment["FMDB_KILLS"].flatMap(Int.init) ?? 15 }

    /// Starts `executable`, waits `delay` seconds, SIGKILLs it, returns its stdout (TestSupport's helper).
    func runAndKill(
        _ executable: String, _ arguments: [String], after delay: Double, onceItPrints: Bool = false,
        env: [String: String] = [:]
    ) throws -> (output: String, killed: Bool) {
        try TestSupport.runAndKill(executable, arguments, after: delay, onceItPrints: onceItPrints, environment: env)
    }

    func open(_ path: String, hexKey: String) -> FMDatabase? {
        let db = FMDatabase(path: path)
        db.logsErrors = false
        guard db.open() else { return nil }
        var key = hexKey
        let provider = key.withUTF8 { try? RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0))) }
        guard let provider, (try? db.setKey(using: provider)) != nil else {
            db.close()
            return nil
        }
        return db
    }

    func testKillDuringWritesLosesNothingAcknowledged() throws {
        var totalKills = 0
        for mode in ["wal", "delete"] {
            let path = directory.path("writes-\(mode).db")
            var acknowledged = Set<Int>()
            // Every other round's delay counts from the writer's first acknowledgement, so however loaded the
            // machine, those rounds kill a writer that has committed (each adds at least one acknowledgement);
            // the rounds between count from its start, so kills also land while it opens and keys the file.
            for round in 0..<kills {
                let afterProgress = round % 2 == 1
                let delay = Double.random(in: 0.02...0.15, using: &rng)
                let (output, killed) = try runAndKill(
                    helper, ["writer", path, mode, Self.keyA], after: delay, onceItPrints: afterProgress)
                if killed { totalKills += 1 }
                let acks = output.split(separator: "\n").compactMap { Int($0) }
                if afterProgress { XCTAssertFalse(acks.isEmpty, "\(mode) round \(round): the writer acknowledged") }
                acknowledged.formUnion(acks)
                let db = try XCTUnwrap(
                    open(path, hexKey: Self.keyA), "\(mode) round \(round): the database opens with its key")
                XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok", "\(mode) round \(round)")
                guard db.tableExists("acks") else {
                    // Killed before its first commit (a slow start, under a sanitizer say): nothing was acknowledged.
                    XCTAssertTrue(acknowledged.isEmpty, "\(mode) round \(round)")
                    db.close()
                    continue
                }
                var present = Set<Int>()
                let rs = try db.executeQuery("SELECT n FROM acks", values: nil)
                while rs.next() { present.insert(rs.long(forColumnIndex: 0)) }
                db.close()
                // The writer deletes row m-25 in every transaction m that is a multiple of 50 (such rows are
                // never deleted themselves). A transaction can commit and be killed before its acknowledgement
                // is written: its deletion counts too, which its own row being present proves.
                let deleted = Set(acknowledged.union(present).filter { $0 % 50 == 0 }.map { $0 - 25 })
                let missing = acknowledged.subtracting(deleted).subtracting(present)
                XCTAssertTrue(
                    missing.isEmpty, "\(mode) round \(round): acknowledged but missing: \(missing.sorted().prefix(5))")
            }
            XCTAssertGreaterThanOrEqual(acknowledged.count, kills / 2, "the writer made progress in \(mode) mode")
        }
        XCTAssertGreaterThanOrEqual(totalKills, 2 * kills - 2, "the kills landed while the writer ran")
    }

    /// A database big enough that a rekey takes a while.
    func makeLargeDatabase(_ name: String, hexKey: String, rows: Int = 12_000) throws -> String {
        let path = directory.path(name)
        let db = try XCTUnwrap(open(path, hexKey: hexKey))
        XCTAssertTrue(db.executeUpdate("create table big (id integer primary key, payload blob)"))
        XCTAssertTrue(db.beginTransaction())
        let insert = try db.prepareStatement("insert into big (payload) values (randomblob(1000))")
        for _ in 0..<rows { try insert.execute() }
        XCTAssertTrue(db.commit())
        db.close()
        return path
    }

    /// Exactly one of the keys opens the file, and the data is complete and intact. Returns that key.
    func assertExactlyOneKeyOpens(_ path: String, rows: Int32, context: String) -> String? {
        var opened: [String] = []
        for key in [Self.keyA, Self.keyB] {
            guard let db = open(path, hexKey: key) else { continue }
            XCTAssertEqual(db.string(forQuery: "PRAGMA integrity_check"), "ok", context)
            XCTAssertEqual(db.int(forQuery: "select count(*) from big"), rows, context)
            db.close()
            opened.append(key)
        }
        XCTAssertEqual(opened.count, 1, "\(context): exactly one key opens the file")
        return opened.first
    }

    func testKillDuringLibraryAndToolRekey() throws {
        let rows: Int32 = 12_000
        let path = try makeLargeDatabase("rekey.db", hexKey: Self.keyA, rows: Int(rows))
        var current = Self.keyA
        var outcomes = [String: Int]()
        for round in 0..<max(kills / 2, 4) {
            let next = current == Self.keyA ? Self.keyB : Self.keyA
            let delay = Double.random(in: 0.05...2.0, using: &rng)
            let useTool = round % 2 == 1
            let (_, killed) =
                useTool
                ? try runAndKill(
                    tool, ["rekey", path, "--kdf", "raw", "--key-env", "OLD", "--new-key-env", "NEW", "--quiet"],
                    after: delay, env: ["OLD": current, "NEW": next])
                : try runAndKill(helper, ["rekeyer", path, current, next], after: delay)
            guard
                let now = assertExactlyOneKeyOpens(
                    path, rows: rows, context: "round \(round) (\(useTool ? "tool" : "library"))")
            else {
                return
            }
            outcomes[killed ? (now == current ? "killed, old key" : "killed, new key") : "finished", default: 0] += 1
            current = now
        }
        // The tool's documented recovery: check with the old key, then with the new one.
        XCTAssertEqual(
            try runProcess(
                tool, ["check", path, "--kdf", "raw", "--key-env", "K"],
                environment: ProcessInfo.processInfo.environment.merging(["K": current]) { _, n in n }
            ).status, 0)
        print("kill during rekey outcomes: \(outcomes)")
    }

    func testKillDuringEncryptDecryptExport() throws {
        let plain = directory.path("plain.db")
        let db = FMDatabase(path: plain)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table big (id integer primary key, payload blob)"))
        XCTAssertTrue(db.beginTransaction())
        for _ in 0..<8_000 { XCTAssertTrue(db.executeUpdate("insert into big (payload) values (randomblob(1000))")) }
        XCTAssertTrue(db.commit())
        db.close()
        let env = ProcessInfo.processInfo.environment.merging(["K": Self.keyA, "N": Self.keyB]) { _, n in n }
        XCTAssertEqual(
            try runProcess(
                tool, ["encrypt", plain, directory.path("enc.db"), "--kdf", "raw", "--key-env", "K"], environment: env
            ).status, 0)
        let encrypted = directory.path("enc.db")
        let jobs: [(String, [String], String?)] = [
            (
                "encrypt",
                ["encrypt", plain, directory.path("dest-e.db"), "--kdf", "raw", "--key-env", "K", "--quiet"], Self.keyA
            ),
            (
                "decrypt",
                ["decrypt", encrypted, directory.path("dest-d.db"), "--kdf", "raw", "--key-env", "K", "--quiet"], nil
            ),
            (
                "export",
                [
                    "export", encrypted, directory.path("dest-x.db"), "--kdf", "raw", "--key-env", "K", "--new-key-env",
                    "N", "--quiet",
                ], Self.keyB
            ),
        ]
        let plainBefore = try Data(contentsOf: URL(fileURLWithPath: plain))
        let encryptedBefore = try Data(contentsOf: URL(fileURLWithPath: encrypted))
        for (name, arguments, destinationKey) in jobs {
            let dest = arguments[2]
            var absent = 0
            var complete = 0
            for round in 0..<max(kills / 3, 4) {
                try? FileManager.default.removeItem(atPath: dest)
                let delay = Double.random(in: 0.01...1.2, using: &rng)
                _ = try runAndKill(tool, arguments, after: delay, env: ["K": Self.keyA, "N": Self.keyB])
                if FileManager.default.fileExists(atPath: dest) {
                    complete += 1
                    let copy: FMDatabase?
                    if let destinationKey {
                        copy = open(dest, hexKey: destinationKey)
                    } else {
                        let plainCopy = FMDatabase(path: dest)
                        copy = plainCopy.open() ? plainCopy : nil
                    }
                    let opened = try XCTUnwrap(copy, "\(name) round \(round): DEST exists, so it must be complete")
                    XCTAssertEqual(opened.string(forQuery: "PRAGMA integrity_check"), "ok")
                    XCTAssertEqual(opened.int(forQuery: "select count(*) from big"), 8_000, "\(name) round \(round)")
                    opened.close()
                } else {
                    absent += 1
                }
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: plain)), plainBefore, "\(name): SRC untouched")
            XCTAssertEqual(
                try Data(contentsOf: URL(fileURLWithPath: encrypted)), encryptedBefore, "\(name): SRC untouched")
            print("kill during \(name): DEST absent \(absent) times, complete \(complete) times")
        }
    }
}
