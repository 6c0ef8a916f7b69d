// bench-grdb: the workloads through GRDB 7.10.0 on the system SQLite (no encryption: plain mode only),
// written the way a GRDB expert writes fast code: one reused statement, cursors, columns by index.
// Usage: bench-grdb WORKLOAD plain DBPATH   Prints: seconds checksum maxrss_kb (service, W6: also tps,
// p50_us, p99_us, failures)
import BenchSupport
import Foundation
import GRDB

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: bench-grdb WORKLOAD MODE DBPATH\n".utf8))
    exit(64)
}
let (workload, path) = (arguments[1], arguments[3])
let rows = envInt("BENCH_ROWS", 200_000)
let lookups = envInt("BENCH_LOOKUPS", 50_000)
let opens = envInt("BENCH_OPENS", 50)

func makeQueue() throws -> DatabaseQueue {
    var config = Configuration()
    config.prepareDatabase { db in
        try db.execute(sql: "PRAGMA synchronous = NORMAL")
    }
    let queue = try DatabaseQueue(path: path, configuration: config)
    try queue.writeWithoutTransaction { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
    return queue
}

var checksum = 0.0
var elapsed = 0.0
var extra = ""
do {
    switch workload {
    case "insert":
        let queue = try makeQueue()
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, r REAL, s TEXT, b BLOB)")
        }
        let start = now()
        try queue.write { db in
            let statement = try db.makeStatement(sql: "INSERT INTO t (id, a, r, s, b) VALUES (?, ?, ?, ?, ?)")
            var lcg = LCG(state: 42)
            var blob = [UInt8](repeating: 0, count: 32)
            for i in 1...rows {
                let a = Int64(lcg.next() % 1_000_000)
                let r = Double(lcg.next() % 100_000) / 100.0
                let text = rowText(i)
                for k in 0..<32 { blob[k] = UInt8(truncatingIfNeeded: lcg.next()) }
                statement.setUncheckedArguments([Int64(i), a, r, text, Data(blob)])
                try statement.execute()
                checksum += Double(a) + r
            }
        }
        elapsed = now() - start
    case "scan":
        let queue = try makeQueue()
        let start = now()
        try queue.read { db in
            let statement = try db.makeStatement(sql: "SELECT id, a, r, s, b FROM t")
            let cursor = try Row.fetchCursor(statement)
            while let row = try cursor.next() {
                checksum += Double(row[0] as Int64) + Double(row[1] as Int64) + (row[2] as Double)
                try row.withUnsafeData(atIndex: 3) { text in
                    checksum += Double(text?.count ?? 0) + Double(text?.first ?? 0)
                }
                try row.withUnsafeData(atIndex: 4) { bytes in
                    if let bytes, let first = bytes.first, let last = bytes.last {
                        checksum += Double(first) + Double(last)
                    }
                }
            }
        }
        elapsed = now() - start
    case "lookup":
        let queue = try makeQueue()
        let start = now()
        try queue.read { db in
            let statement = try db.cachedStatement(sql: "SELECT a, r, s, b FROM t WHERE id = ?")
            var lcg = LCG(state: 7)
            for _ in 0..<lookups {
                statement.setUncheckedArguments([Int64(lcg.next() % UInt64(rows)) + 1])
                if let row = try Row.fetchOne(statement) {
                    checksum += Double(row[0] as Int64) + (row[1] as Double)
                    try row.withUnsafeData(atIndex: 2) { checksum += Double($0?.count ?? 0) }
                    try row.withUnsafeData(atIndex: 3) { checksum += Double($0?.count ?? 0) }
                }
            }
        }
        elapsed = now() - start
    case "open":
        let start = now()
        for _ in 0..<opens {
            let queue = try DatabaseQueue(path: path)
            checksum += Double(
                try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") } ?? 0)
            try queue.close()
        }
        elapsed = now() - start
    case "service":
        // W6: a DatabasePool serving point reads and small write transactions from one thread per core.
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        config.maximumReaderCount = ServiceWorkload.threads
        let pool = try DatabasePool(path: path, configuration: config)
        let serviceRows = ServiceWorkload.rows
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, s TEXT)")
            try db.execute(sql: "CREATE TABLE log (id INTEGER PRIMARY KEY, t_id INTEGER)")
            let insert = try db.makeStatement(sql: "INSERT INTO t (id, a, s) VALUES (?, ?, ?)")
            for i in 1...serviceRows { try insert.execute(arguments: [i, i, rowText(i)]) }
        }
        let results = ServiceResults()
        let start = now()
        let deadline = start + ServiceWorkload.seconds
        let group = DispatchGroup()
        for thread in 0..<ServiceWorkload.threads {
            group.enter()
            Thread {
                defer { group.leave() }
                var lcg = LCG(state: 1000 + UInt64(thread))
                var latencies: [Double] = []
                var writeLatencies: [Double] = []
                var completions: [Double] = []
                var total = 0.0
                var failures = 0
                while true {
                    let t0 = now()
                    if t0 >= deadline { break }
                    let r = lcg.next()
                    let id = Int64(r % UInt64(serviceRows)) + 1
                    let isWrite = r % ServiceWorkload.writeEvery == 0
                    do {
                        if isWrite {
                            try pool.write { db in
                                try db.cachedStatement(sql: "UPDATE t SET a = a + 1 WHERE id = ?").execute(arguments: [
                                    id
                                ])
                                try db.cachedStatement(sql: "INSERT INTO log (t_id) VALUES (?)").execute(arguments: [id]
                                )
                            }
                        } else {
                            total += try pool.read { db in
                                let statement = try db.cachedStatement(sql: "SELECT a, s FROM t WHERE id = ?")
                                return try Row.fetchOne(statement, arguments: [id]).map { Double($0[0] as Int64) } ?? 0
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
            }.start()
        }
        group.wait()
        elapsed = now() - start
        checksum = results.checksum
        extra =
            ServiceWorkload.summary(
                latencies: results.latencies, writeLatencies: results.writeLatencies, elapsed: elapsed)
            + " failures=\(results.failures)"
    default:
        FileHandle.standardError.write(Data("bench-grdb: unknown workload \(workload)\n".utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("bench-grdb: \(error)\n".utf8))
    exit(1)
}
print(String(format: "%.6f %.2f %d", elapsed, checksum, maxRSS()) + extra)
