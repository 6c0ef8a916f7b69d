// bench-fmdb: the workloads through this library.
// Usage: bench-fmdb WORKLOAD MODE DBPATH VARIANT
//   WORKLOAD insert | scan | lookup: VARIANT compat (FMDB's [Any] API, getters by column name, cached
//     statements), compat-index (the same with getters by column index) or fast (PreparedStatement);
//     scan also takes codable ("W2 through Codable": each row decoded into a Decodable struct), and insert
//     codable (W1 through Codable: each row an Encodable struct bound as named parameters);
//     MODE plain | encrypted (raw key, with the library's keyed-connection defaults)
//   WORKLOAD rekey: MODE encrypted, VARIANT raw (rekeys DBPATH from the raw key to another raw key)
//   WORKLOAD open: VARIANT plain | raw | passphrase | pbkdf2 (one PBKDF2KeyProvider reused)
//   WORKLOAD keycheck: VARIANT schema-version (the per-block key check next to a W3 lookup, per call)
//   WORKLOAD service (W6): VARIANT pool (a pool serving reads and write transactions from one thread per
//     core, BENCH_SECONDS) | slots (encrypted: the same on a slotted database, through a slot change and a
//     data-key rotation); prints also tps, p50_us, p99_us, failures (and requests/s through each action)
//     (BENCH_SLOT_KDF_ITERATIONS=N: the slots use PBKDF2 with N iterations, for a quick smoke run)
//   WORKLOAD version: prints the linked SQLCipher's PRAGMA cipher_version (MODE and VARIANT unused)
//   WORKLOAD pool: VARIANT queue (1 thread, FMDatabaseQueue) | pool (2 threads, FMDatabasePool, WAL)
//   BENCH_FMDB_CACHE_SIZE=N: `PRAGMA cache_size = N` after keying (-2000: SQLite's default instead of the
//     library's 8 MiB keyed cache), so the cache's cost in time and peak memory can be measured
// Prints: seconds checksum maxrss_kb (pool also prints the number of key derivations)
import FMDB
import BenchSupport
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 5 else {
    FileHandle.standardError.write(Data("usage: bench-fmdb WORKLOAD MODE DBPATH VARIANT\n".utf8))
    exit(64)
}
let (workload, mode, path, variant) = (arguments[1], arguments[2], arguments[3], arguments[4])
let rows = envInt("BENCH_ROWS", 200_000)
let lookups = envInt("BENCH_LOOKUPS", 50_000)
let opens = envInt("BENCH_OPENS", 50)
let rawKey = Data([
    0x2D, 0xD2, 0x9C, 0xA8, 0x51, 0xE7, 0xB5, 0x6E, 0x46, 0x97, 0xB0, 0xE1, 0xF0, 0x85, 0x07, 0x29,
    0x3D, 0x76, 0x1A, 0x05, 0xCE, 0x4D, 0x1B, 0x62, 0x86, 0x63, 0xF4, 0x11, 0xA8, 0x08, 0x6D, 0x99,
])
let passphrase = "benchmark passphrase"

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("bench-fmdb: \(message)\n".utf8))
    exit(1)
}

func cipherSettings() -> CipherSettings {
    CipherSettings(pageSize: ProcessInfo.processInfo.environment["BENCH_CIPHER_PAGE_SIZE"].flatMap(Int.init))
}

func openDatabase() -> FMDatabase {
    let db = FMDatabase(path: path)
    guard db.open() else { fail(db.lastErrorMessage()) }
    do {
        if mode == "encrypted" { try db.setKey(using: RawKeyProvider(key: rawKey), settings: cipherSettings()) }
        if let cacheSize = ProcessInfo.processInfo.environment["BENCH_FMDB_CACHE_SIZE"].flatMap(Int.init) {
            try db.executeUpdate("PRAGMA cache_size = \(cacheSize)", values: nil)
        }
    } catch {
        fail("key: \(error)")
    }
    guard db.string(forQuery: "PRAGMA journal_mode = WAL") == "wal" else { fail("WAL: \(db.lastErrorMessage())") }
    db.executeStatements("PRAGMA synchronous = NORMAL")
    return db
}

var checksum = 0.0
var elapsed = 0.0
var extra = ""

switch (workload, variant) {
case ("insert", _):
    let db = openDatabase()
    guard db.executeUpdate("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, r REAL, s TEXT, b BLOB)") else {
        fail(db.lastErrorMessage())
    }
    let start = now()
    db.beginDeferredTransaction()
    var lcg = LCG(state: 42)
    var blob = [UInt8](repeating: 0, count: 32)
    let sql = "INSERT INTO t (id, a, r, s, b) VALUES (?, ?, ?, ?, ?)"
    if variant == "fast" {
        guard let insert = try? db.prepareStatement(sql) else { fail(db.lastErrorMessage()) }
        for i in 1...rows {
            let a = Int64(lcg.next() % 1_000_000)
            let r = Double(lcg.next() % 100_000) / 100.0
            let text = rowText(i)
            for k in 0..<32 { blob[k] = UInt8(truncatingIfNeeded: lcg.next()) }
            do { try insert.execute(Int64(i), a, r, text, blob) } catch { fail("insert: \(error)") }
            checksum += Double(a) + r
        }
    } else if variant == "codable" {
        // The same rows as compat, each an Encodable struct bound by property name (executeUpdate(_:encoding:)).
        struct Row: Encodable { let id: Int64; let a: Int64; let r: Double; let s: String; let b: Data }
        db.shouldCacheStatements = true
        let named = "INSERT INTO t (id, a, r, s, b) VALUES (:id, :a, :r, :s, :b)"
        for i in 1...rows {
            let a = Int64(lcg.next() % 1_000_000)
            let r = Double(lcg.next() % 100_000) / 100.0
            let text = rowText(i)
            for k in 0..<32 { blob[k] = UInt8(truncatingIfNeeded: lcg.next()) }
            do {
                try db.executeUpdate(named, encoding: Row(id: Int64(i), a: a, r: r, s: text, b: Data(blob)))
            } catch {
                fail("insert: \(error)")
            }
            checksum += Double(a) + r
        }
    } else {
        db.shouldCacheStatements = true
        for i in 1...rows {
            let a = Int64(lcg.next() % 1_000_000)
            let r = Double(lcg.next() % 100_000) / 100.0
            let text = rowText(i)
            for k in 0..<32 { blob[k] = UInt8(truncatingIfNeeded: lcg.next()) }
            guard db.executeUpdate(sql, withArgumentsIn: [i, a, r, text, Data(blob)]) else {
                fail(db.lastErrorMessage())
            }
            checksum += Double(a) + r
        }
    }
    guard db.commit() else { fail(db.lastErrorMessage()) }
    elapsed = now() - start
    db.close()

case ("scan", _):
    let db = openDatabase()
    let start = now()
    let sql = "SELECT id, a, r, s, b FROM t"
    if variant == "fast" {
        guard let scan = try? db.prepareStatement(sql) else { fail(db.lastErrorMessage()) }
        do {
            while try scan.step() {
                checksum += Double(scan.int64(at: 0)) + Double(scan.int64(at: 1)) + scan.double(at: 2)
                scan.withUnsafeBytes(at: 3) { text in
                    checksum += Double(text?.count ?? 0) + Double(text?.first ?? 0)
                }
                scan.withUnsafeBytes(at: 4) { bytes in
                    if let bytes, let first = bytes.first, let last = bytes.last {
                        checksum += Double(first) + Double(last)
                    }
                }
            }
        } catch {
            fail("scan: \(error)")
        }
    } else if variant == "codable" {
        // The same columns as compat-index, decoded by name into a struct (FMResultSet.decode).
        struct Row: Decodable { let id: Int64; let a: Int64; let r: Double; let s: String?; let b: Data? }
        guard let rs = db.executeQuery(sql) else { fail(db.lastErrorMessage()) }
        do {
            while rs.next() {
                let row = try rs.decode(Row.self)
                checksum += Double(row.id) + Double(row.a) + row.r
                if let text = row.s {
                    checksum += Double(text.utf8.count) + Double(text.utf8.first ?? 0)
                }
                if let bytes = row.b, let first = bytes.first, let last = bytes.last {
                    checksum += Double(first) + Double(last)
                }
            }
        } catch {
            fail("decode: \(error)")
        }
    } else if variant == "compat-index" {
        guard let rs = db.executeQuery(sql) else { fail(db.lastErrorMessage()) }
        while rs.next() {
            checksum +=
                Double(rs.longLongInt(forColumnIndex: 0)) + Double(rs.longLongInt(forColumnIndex: 1))
                + rs.double(forColumnIndex: 2)
            if let text = rs.string(forColumnIndex: 3) {
                checksum += Double(text.utf8.count) + Double(text.utf8.first ?? 0)
            }
            if let bytes = rs.data(forColumnIndex: 4), let first = bytes.first, let last = bytes.last {
                checksum += Double(first) + Double(last)
            }
        }
    } else {
        guard let rs = db.executeQuery(sql) else { fail(db.lastErrorMessage()) }
        while rs.next() {
            checksum +=
                Double(rs.longLongInt(forColumn: "id")) + Double(rs.longLongInt(forColumn: "a"))
                + rs.double(forColumn: "r")
            if let text = rs.string(forColumn: "s") {
                checksum += Double(text.utf8.count) + Double(text.utf8.first ?? 0)
            }
            if let bytes = rs.data(forColumn: "b"), let first = bytes.first, let last = bytes.last {
                checksum += Double(first) + Double(last)
            }
        }
    }
    elapsed = now() - start
    db.close()

case ("lookup", _):
    let db = openDatabase()
    let start = now()
    var lcg = LCG(state: 7)
    let sql = "SELECT a, r, s, b FROM t WHERE id = ?"
    if variant == "fast" {
        guard let lookup = try? db.prepareStatement(sql) else { fail(db.lastErrorMessage()) }
        do {
            for _ in 0..<lookups {
                try lookup.bind(Int64(lcg.next() % UInt64(rows)) + 1)
                if try lookup.step() {
                    checksum += Double(lookup.int64(at: 0)) + lookup.double(at: 1)
                    checksum += Double(lookup.byteCount(at: 2)) + Double(lookup.byteCount(at: 3))
                }
                lookup.reset()
            }
        } catch {
            fail("lookup: \(error)")
        }
    } else {
        db.shouldCacheStatements = true
        for _ in 0..<lookups {
            let id = Int64(lcg.next() % UInt64(rows)) + 1
            guard let rs = db.executeQuery(sql, withArgumentsIn: [id]) else { fail(db.lastErrorMessage()) }
            if variant == "compat-index" {
                if rs.next() {
                    checksum += Double(rs.longLongInt(forColumnIndex: 0)) + rs.double(forColumnIndex: 1)
                    checksum +=
                        Double(rs.string(forColumnIndex: 2)?.utf8.count ?? 0)
                        + Double(rs.data(forColumnIndex: 3)?.count ?? 0)
                }
            } else if rs.next() {
                checksum += Double(rs.longLongInt(forColumn: "a")) + rs.double(forColumn: "r")
                checksum +=
                    Double(rs.string(forColumn: "s")?.utf8.count ?? 0) + Double(rs.data(forColumn: "b")?.count ?? 0)
            }
            rs.close()
        }
    }
    elapsed = now() - start
    db.close()

case ("rekey", _):
    // Key rotation of an existing file: every page read, decrypted, encrypted with the new key, written.
    // The file's own journal mode (rollback by default), as `fmdb-cipher rekey` leaves it.
    let db = FMDatabase(path: path)
    guard db.open() else { fail(db.lastErrorMessage()) }
    do { try db.setKey(using: RawKeyProvider(key: rawKey)) } catch { fail("key: \(error)") }
    var newKey = rawKey
    newKey[0] ^= 0xFF
    let start = now()
    do { try db.rekey(using: RawKeyProvider(key: newKey)) } catch { fail("rekey: \(error)") }
    elapsed = now() - start
    checksum = Double(db.int(forQuery: "SELECT count(*) FROM sqlite_master"))
    db.close()

case ("open", _):
    let reused = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: passphrase)
    if variant == "pbkdf2" {
        // The one derivation happens here, before the clock starts: W4 measures the opens that reuse it.
        _ = try? reused.key(
            for: KeyRequest(databasePath: path, salt: FileManager.default.contents(atPath: path)?.prefix(16)))
    }
    let start = now()
    for _ in 0..<opens {
        let db = FMDatabase(path: path)
        guard db.open(withFlags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX) else { fail(db.lastErrorMessage()) }
        do {
            switch variant {
            case "raw": try db.setKey(using: RawKeyProvider(key: rawKey))
            case "passphrase": try db.setKey(using: PassphraseKeyProvider(passphrase))
            case "pbkdf2": try db.setKey(using: reused)
            default: break
            }
        } catch {
            fail("key: \(error)")
        }
        checksum += Double(db.int(forQuery: "SELECT count(*) FROM sqlite_master"))
        db.close()
    }
    elapsed = now() - start
    extra = " derivations=\(reused.derivationCount)"

case ("pool", "queue"):
    guard let queue = FMDatabaseQueue(path: path) else { fail("queue open") }
    if mode == "encrypted" { fail("pool workload runs plain") }
    queue.inDatabase { db in _ = db.string(forQuery: "PRAGMA journal_mode = WAL") }
    var lcg = LCG(state: 7)
    let ids = (0..<lookups).map { _ in Int64(lcg.next() % UInt64(rows)) + 1 }
    let start = now()
    var total = 0.0
    for chunk in stride(from: 0, to: ids.count, by: 1000) {
        queue.inDatabase { db in
            // One read transaction per block: the WAL read lock is taken once, not once per lookup.
            db.beginDeferredTransaction()
            defer { db.commit() }
            guard let lookup = try? db.prepareStatement("SELECT a, r FROM t WHERE id = ?") else { return }
            for id in ids[chunk..<min(chunk + 1000, ids.count)] {
                try? lookup.bind(id)
                if (try? lookup.step()) == true { total += Double(lookup.int64(at: 0)) + lookup.double(at: 1) }
            }
        }
    }
    elapsed = now() - start
    checksum = total
    queue.close()

case ("pool", "pool"):
    let pool = FMDatabasePool(path: path)
    pool.inDatabase { db in _ = db.string(forQuery: "PRAGMA journal_mode = WAL") }
    // Both connections open before the clock starts, as the queue's one is.
    pool.inDatabase { _ in pool.inDatabase { db in _ = db.int(forQuery: "SELECT count(*) FROM sqlite_master") } }
    var lcg = LCG(state: 7)
    let ids = (0..<lookups).map { _ in Int64(lcg.next() % UInt64(rows)) + 1 }
    let halves = [Array(ids[0..<ids.count / 2]), Array(ids[(ids.count / 2)...])]
    let sums = Locked([0.0, 0.0])
    let start = now()
    DispatchQueue.concurrentPerform(iterations: 2) { half in
        var total = 0.0
        let mine = halves[half]
        for chunk in stride(from: 0, to: mine.count, by: 1000) {
            pool.inDatabase { db in
                db.beginDeferredTransaction()
                defer { db.commit() }
                guard let lookup = try? db.prepareStatement("SELECT a, r FROM t WHERE id = ?") else { return }
                for id in mine[chunk..<min(chunk + 1000, mine.count)] {
                    try? lookup.bind(id)
                    if (try? lookup.step()) == true { total += Double(lookup.int64(at: 0)) + lookup.double(at: 1) }
                }
            }
        }
        sums.set(half, total)
    }
    elapsed = now() - start
    checksum = sums.total
    pool.releaseAllDatabases()

case ("keycheck", "schema-version"):
    // The cost of the check a keyed queue or pool makes before each block (is the file under another key?
    // QueueAndPool/KeyChanges/FMDatabase+KeyCheck.swift: `PRAGMA schema_version` on the connection, its header page
    // cached), next to the W3 lookup it guards: BENCH_LOOKUPS lookups by id, then as many checks.
    let db = openDatabase()
    var lcg = LCG(state: 7)
    let ids = (0..<lookups).map { _ in Int64(lcg.next() % UInt64(rows)) + 1 }
    do {
        let lookup = try db.prepareStatement("SELECT a, r, s, b FROM t WHERE id = ?")
        let lookupStart = now()
        for id in ids {
            try lookup.bind(id)
            if try lookup.step() { checksum += Double(lookup.int64(at: 0)) }
        }
        let lookupTime = now() - lookupStart
        let checkStart = now()
        for _ in ids {
            let rs = try db.executeQuery("PRAGMA schema_version", values: nil)
            if try rs.nextWithError() { checksum += Double(rs.long(forColumnIndex: 0)) }
            rs.close()
        }
        let checkTime = now() - checkStart
        // The same check with its statement prepared once (what a cached check would cost).
        let check = try db.prepareStatement("PRAGMA schema_version")
        let preparedStart = now()
        for _ in ids {
            if try check.step() { checksum += Double(check.int64(at: 0)) }
            check.reset()
        }
        let preparedTime = now() - preparedStart
        elapsed = lookupTime + checkTime + preparedTime
        extra = String(
            format: " lookup_ns=%.0f check_ns=%.0f prepared_check_ns=%.0f", lookupTime / Double(lookups) * 1e9,
            checkTime / Double(lookups) * 1e9, preparedTime / Double(lookups) * 1e9)
    } catch {
        fail("keycheck: \(error)")
    }
    db.close()

case ("version", _):
    // The SQLCipher this executable runs: Scripts/bench checks it is the line it built against.
    let db = FMDatabase(path: path)
    guard db.open(), let version = db.cipherVersion else { fail("cipher_version: \(db.lastErrorMessage())") }
    db.close()
    print(version)
    exit(0)

case ("service", "pool"), ("service", "slots"):
    // W6: a keyed WAL pool serving point reads and small write transactions (an UPDATE and an INSERT) from
    // one thread per core for BENCH_SECONDS. "slots": on a slotted database (scrypt slot), with an operator's
    // slot change at 1/3 of the run and a data-key rotation at 2/3, both from this process's KeySlots API
    // (not through the pool, as fmdb-cipher would do them).
    let slotted = variant == "slots"
    let serviceRows = ServiceWorkload.rows
    // BENCH_SLOT_KDF_ITERATIONS=N: the slots' KDF is PBKDF2 with N iterations instead of the default scrypt, so
    // the smoke run's slot change takes milliseconds (its times mean nothing anyway).
    let slotKDF =
        ProcessInfo.processInfo.environment["BENCH_SLOT_KDF_ITERATIONS"].flatMap(Int.init).map {
            KeySlotKDF.unsafePBKDF2SHA512(iterations: $0)
        } ?? .default
    let setUp: @Sendable (FMDatabase) throws -> Void = { db in
        db.shouldCacheStatements = true
        try db.executeUpdate("PRAGMA synchronous = NORMAL", values: nil)
    }
    let pool: FMDatabasePool
    let serviceSetUp = ServiceSetUp()  // The pool's delegate is weak: kept here for the whole run.
    do {
        if slotted {
            if mode != "encrypted" { fail("service slots runs encrypted") }
            try KeySlots.createDatabase(at: path, secret: .passphrase("service"), kdf: slotKDF)
            _ = try KeySlots.addSlot(
                to: path, unlockingWith: .passphrase("service"), newSecret: .passphrase("operator"), kdf: slotKDF)
            pool = try FMDatabasePool(
                path: path,
                configuration: FMDatabaseConfiguration(
                    keyProvider: KeySlotKeyProvider(secret: .passphrase("service")), prepareDatabase: setUp))
        } else if mode == "encrypted" {
            pool = try FMDatabasePool(
                path: path,
                configuration: FMDatabaseConfiguration(keyProvider: RawKeyProvider(key: rawKey), prepareDatabase: setUp)
            )
        } else {
            pool = FMDatabasePool(path: path)
            pool.delegate = serviceSetUp  // Every connection gets synchronous = NORMAL, as in the other programs.
        }
        try pool.inDatabase { db in
            try setUp(db)
            guard db.string(forQuery: "PRAGMA journal_mode = WAL") == "wal" else { fail("WAL") }
            try db.executeUpdate("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, s TEXT)", values: nil)
            try db.executeUpdate("CREATE TABLE log (id INTEGER PRIMARY KEY, t_id INTEGER)", values: nil)
            try db.inTransaction(.immediate) { db in
                for i in 1...serviceRows {
                    try db.executeUpdate("INSERT INTO t (id, a, s) VALUES (?, ?, ?)", values: [i, i, rowText(i)])
                }
            }
        }
    } catch {
        fail("service set-up: \(error)")
    }
    let results = ServiceResults()
    let actions = Protected<[Double]>([])
    // BENCH_CACHE_MISSES=1: each request's page cache misses (on a keyed file, each is a page read,
    // authenticated and decrypted): SQLITE_DBSTATUS_CACHE_MISS read and reset at the end of every block.
    let countMisses = envInt("BENCH_CACHE_MISSES", 0) != 0
    let misses = Protected<[Int]>([0, 0])
    let threads = ServiceWorkload.threads
    let start = now()
    let deadline = start + ServiceWorkload.seconds
    let group = DispatchGroup()
    for thread in 0..<threads {
        group.enter()
        Thread {
            defer { group.leave() }
            var lcg = LCG(state: 1000 + UInt64(thread))
            var latencies: [Double] = []
            var writeLatencies: [Double] = []
            var completions: [Double] = []
            var total = 0.0
            var failures = 0
            var (readMisses, writeMisses) = (0, 0)
            latencies.reserveCapacity(200_000)
            writeLatencies.reserveCapacity(50_000)
            completions.reserveCapacity(200_000)
            while true {
                let t0 = now()
                if t0 >= deadline { break }
                let r = lcg.next()
                let id = Int64(r % UInt64(serviceRows)) + 1
                let isWrite = r % ServiceWorkload.writeEvery == 0
                do {
                    if isWrite {
                        try pool.inTransaction(.immediate) { db in
                            try db.executeUpdate("UPDATE t SET a = a + 1 WHERE id = ?", values: [id])
                            try db.executeUpdate("INSERT INTO log (t_id) VALUES (?)", values: [id])
                            if countMisses { writeMisses += takeMisses(db) }
                        }
                    } else {
                        total += try pool.inDatabase { db in
                            db.shouldCacheStatements = true
                            let rs = try db.executeQuery("SELECT a, s FROM t WHERE id = ?", values: [id])
                            defer { rs.close() }
                            let value = try rs.nextWithError() ? Double(rs.longLongInt(forColumnIndex: 0)) : 0
                            if countMisses { readMisses += takeMisses(db) }
                            return value
                        }
                    }
                } catch {
                    failures += 1
                }
                let t1 = now()
                latencies.append(t1 - t0)
                if isWrite { writeLatencies.append(t1 - t0) }
                completions.append(t1)
            }
            results.add(
                latencies: latencies, writeLatencies: writeLatencies, completions: completions, checksum: total,
                failures: failures)
            misses.withLock {
                $0[0] += readMisses
                $0[1] += writeMisses
            }
        }.start()
    }
    if slotted {
        // The operator: a slot change at 1/3 of the run, a data-key rotation at 2/3 (start and end of each).
        Thread.sleep(forTimeInterval: ServiceWorkload.seconds / 3)
        do {
            let a = now()
            _ = try KeySlots.changeSlot(
                of: path, from: .passphrase("operator"), to: .passphrase("operator-2"), kdf: slotKDF)
            let b = now()
            Thread.sleep(forTimeInterval: max(0, start + 2 * ServiceWorkload.seconds / 3 - now()))
            let c = now()
            _ = try KeySlots.rotateDataKey(of: path, secrets: [.passphrase("operator-2"), .passphrase("service")])
            let d = now()
            actions.withLock { $0 = [a, b, c, d] }
        } catch {
            fail("operator: \(error)")
        }
    }
    group.wait()
    elapsed = now() - start
    checksum = results.checksum
    extra =
        ServiceWorkload.summary(
            latencies: results.latencies, writeLatencies: results.writeLatencies, elapsed: elapsed)
        + " failures=\(results.failures)"
    if countMisses {
        let (reads, writes) = (results.latencies.count - results.writeLatencies.count, results.writeLatencies.count)
        let (readMisses, writeMisses) = misses.withLock { ($0[0], $0[1]) }
        extra += String(
            format: " misses_per_read=%.3f misses_per_write=%.3f", Double(readMisses) / Double(max(reads, 1)),
            Double(writeMisses) / Double(max(writes, 1)))
    }
    let marks = actions.withLock { $0 }
    if marks.count == 4 {
        let completions = results.completions
        // Each window: the action itself plus the 0.2 s after it (connections reopened, provider asked again).
        extra += String(
            format: " slot_change_ms=%.0f rps_slot_change=%.0f rotation_ms=%.0f rps_rotation=%.0f",
            (marks[1] - marks[0]) * 1000,
            ServiceWorkload.rate(completions: completions, from: marks[0], to: marks[1] + 0.2),
            (marks[3] - marks[2]) * 1000,
            ServiceWorkload.rate(completions: completions, from: marks[2], to: marks[3] + 0.2))
    }

default:
    fail("unknown workload/variant \(workload) \(variant)")
}

print(String(format: "%.6f %.2f %d", elapsed, checksum, maxRSS()) + extra)

/// The connection's page cache misses since the last call (SQLITE_DBSTATUS_CACHE_MISS, read and reset).
@Sendable func takeMisses(_ db: FMDatabase) -> Int {
    guard let handle = db.sqliteHandle else { return 0 }
    var (current, highwater): (Int32, Int32) = (0, 0)
    sqlite3_db_status(OpaquePointer(handle), SQLITE_DBSTATUS_CACHE_MISS, &current, &highwater, 1)
    return Int(current)
}

/// Sets up each new connection of the plain W6 pool (the keyed pools use `prepareDatabase`).
final class ServiceSetUp: FMDatabasePoolDelegate {
    func databasePool(_ pool: FMDatabasePool, didAddDatabase database: FMDatabase) {
        database.shouldCacheStatements = true
        database.executeStatements("PRAGMA synchronous = NORMAL")
    }
}

/// A value shared between threads, under a lock.
final class Protected<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is read and written only under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Two doubles written from two threads.
final class Locked: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Double]
    init(_ values: [Double]) { self.values = values }
    func set(_ index: Int, _ value: Double) { lock.lock(); values[index] = value; lock.unlock() }
    var total: Double { lock.lock(); defer { lock.unlock() }; return values.reduce(0, +) }
}
