// Scenarios the tests run in a child process: programming errors that must stop the process with a
// clear message (instead of deadlocking), and, later, work to be killed at random moments.
// Not part of the public product: built with the tests, run by the test targets that declare it (Package.swift).
import FMDB
import Foundation

let arguments = CommandLine.arguments.dropFirst()

/// The helper's output: one line on standard output (unbuffered, so a killed helper's lines are all there).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Test keys (hex) as key material. These are throwaway keys of the test suite, not secrets.
func material(_ text: String) -> KeyMaterial {
    var text = text
    return text.withUTF8 { KeyMaterial(copying: UnsafeRawBufferPointer($0)) }
}
/// The terminal the "prompt-with-handler" scenario's signal handler looks at.
nonisolated(unsafe) var promptTerminal: Int32 = -1

guard let scenario = arguments.first else {
    FileHandle.standardError.write(Data("usage: fmdb-test-helper SCENARIO [ARGS]\n".utf8))
    exit(64)
}

switch scenario {
case "queue-reentrant":
    let queue = FMDatabaseQueue()
    queue.inDatabase { _ in
        queue.inDatabase { _ in }
    }
    say("not reached")
case "pool-nested-at-limit":
    let pool = FMDatabasePool()
    pool.maximumNumberOfDatabasesToCreate = 1
    pool.inDatabase { _ in
        pool.inDatabase { _ in }
    }
    say("not reached")
case "pool-rekey-inside-block":
    let pool = FMDatabasePool()
    pool.inDatabase { _ in
        try? pool.rekey(using: PassphraseKeyProvider("x"))
    }
    say("not reached")
case "crash-on-errors":
    let db = FMDatabase()
    db.logsErrors = false
    db.crashOnErrors = true
    _ = db.open()
    db.executeUpdate("this is not sql")
    say("not reached")
case "kdf-costs":
    // The cost of each key derivation, measured through the library (the DocC article "Security guards, their
    // tests and figures" quotes these).
    func median(_ runs: Int, _ body: () throws -> Void) rethrows -> Double {
        var times: [Double] = []
        for _ in 0..<runs {
            let start = DispatchTime.now().uptimeNanoseconds
            try body()
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        return times.sorted()[runs / 2]
    }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fmdb-kdf-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let salt = Data(repeating: 7, count: 16)
    let request = KeyRequest(databasePath: "/x", salt: salt)
    let providers: [(String, () -> any KeyProvider)] = [
        ("PBKDF2-HMAC-SHA512 x 256,000 (PBKDF2KeyProvider default)", { PBKDF2KeyProvider(passphrase: "p") }),
        ("PBKDF2-HMAC-SHA1 x 64,000 (sqlcipherCompatible)", { PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "p") }),
        ("scrypt N=2^15 r=8 p=1, 32 MiB (ScryptKeyProvider default)", { ScryptKeyProvider(passphrase: "p") }),
    ]
    do {
        for (name, make) in providers {
            let ms = try median(5) { _ = try make().key(for: request) }
            say(
                name.padding(toLength: 62, withPad: " ", startingAt: 0)
                    + String(format: "%8.1f ms per derivation (once per salt)", ms))
        }
        let path = folder.appendingPathComponent("open.db").path
        let seed = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider("p"))
        seed.inDatabase { db in db.executeUpdate("create table t (a)") }
        seed.close()
        let passphraseOpen = try median(5) {
            let db = FMDatabase(path: path)
            _ = db.open()
            try db.setKey(using: PassphraseKeyProvider("p"))
            db.close()
        }
        say(
            "open + key + verify, PassphraseKeyProvider (SQLCipher KDF)".padding(
                toLength: 62, withPad: " ", startingAt: 0) + String(format: "%8.1f ms per connection", passphraseOpen))
        let cached = PBKDF2KeyProvider.sqlcipherCompatible(passphrase: "p")
        let cachedOpen = try median(5) {
            let db = FMDatabase(path: path)
            _ = db.open()
            try db.setKey(using: cached)
            db.close()
        }
        say(
            "open + key + verify, reused sqlcipherCompatible provider".padding(
                toLength: 62, withPad: " ", startingAt: 0) + String(format: "%8.1f ms per connection", cachedOpen))
        // Key slots: opening through a slot (one unwrap), and a passphrase change (unwrap + new slot + write).
        for (name, kdf) in [
            ("scrypt N=2^15 r=8 p=1", KeySlotKDF.scrypt()), ("PBKDF2-HMAC-SHA512 x 256,000", KeySlotKDF.pbkdf2SHA512()),
        ] {
            let slotted = folder.appendingPathComponent("slots-\(UUID().uuidString).db").path
            try KeySlots.createDatabase(at: slotted, secret: .passphrase("p0"), kdf: kdf)
            let slotOpen = try median(5) {
                let db = FMDatabase(path: slotted)
                _ = db.open()
                try db.setKey(using: KeySlotKeyProvider(secret: .passphrase("p0")))
                db.close()
            }
            say(
                "open via a key slot, \(name)".padding(toLength: 62, withPad: " ", startingAt: 0)
                    + String(format: "%8.1f ms (fresh provider)", slotOpen))
            var round = 0
            let change = try median(5) {
                try KeySlots.changeSlot(
                    of: slotted, from: .passphrase("p\(round)"), to: .passphrase("p\(round + 1)"), kdf: kdf)
                round += 1
            }
            say(
                "KeySlots.changeSlot, \(name)".padding(toLength: 62, withPad: " ", startingAt: 0)
                    + String(format: "%8.1f ms per change", change))
        }
    } catch {
        FileHandle.standardError.write(Data("kdf-costs failed: \(error)\n".utf8))
        exit(1)
    }
case "writer":
    // writer DB JOURNAL_MODE HEXKEY: commits numbered transactions forever, acknowledging each on stdout
    // after COMMIT returned. The kill tests SIGKILL it at random moments.
    guard arguments.count >= 4 else { exit(64) }
    let args = Array(arguments)
    let db = FMDatabase(path: args[1])
    db.logsErrors = false
    guard db.open() else { exit(3) }
    do {
        try db.setKey(using: RawKeyProvider(material: material(args[3])))
    } catch {
        exit(4)
    }
    _ = db.string(forQuery: "PRAGMA journal_mode = \(args[2])")
    db.executeUpdate("CREATE TABLE IF NOT EXISTS acks (n INTEGER PRIMARY KEY, payload BLOB, note TEXT)")
    var n = Int(db.int(forQuery: "SELECT coalesce(max(n), 0) FROM acks"))
    while true {
        n += 1
        guard db.beginImmediateTransaction() else { continue }
        db.executeUpdate(
            "INSERT INTO acks (n, payload, note) VALUES (?, randomblob(?), ?)", n, 200 + n % 3000, "transaction \(n)")
        if n % 7 == 0 { db.executeUpdate("UPDATE acks SET note = note || '+' WHERE n = ?", n / 2) }
        if n % 50 == 0 { db.executeUpdate("DELETE FROM acks WHERE n = ?", n - 25) }
        guard db.commit() else { db.rollback(); continue }
        FileHandle.standardOutput.write(Data("\(n)\n".utf8))
    }
case "slot-changer":
    // slot-changer DB START: changes the passphrase of a key slot from "pSTART" to "pSTART+1", then on,
    // forever (cheap KDF: most of the time goes to the slot file's write and fsyncs), printing each new
    // number after the change returned. The key slot kill test SIGKILLs it at random moments.
    guard arguments.count >= 3, let start = Int(Array(arguments)[2]) else { exit(64) }
    let path = Array(arguments)[1]
    var n = start
    while true {
        do {
            try KeySlots.changeSlot(
                of: path, from: .passphrase("p\(n)"), to: .passphrase("p\(n + 1)"),
                kdf: .unsafePBKDF2SHA512(iterations: 1_000))
        } catch {
            FileHandle.standardError.write(Data("slot-changer: \(error)\n".utf8))
            exit(5)
        }
        n += 1
        say("\(n)")
    }
case "rekeyer":
    // rekeyer DB OLDHEX NEWHEX: rekeys with the library's safe rekey, prints "done".
    guard arguments.count >= 4 else { exit(64) }
    let args = Array(arguments)
    func provider(_ hex: String) throws -> RawKeyProvider {
        try RawKeyProvider(material: material(hex))
    }
    do {
        let queue = try FMDatabaseQueue(path: args[1], keyProvider: provider(args[2]))
        FileHandle.standardOutput.write(Data("start\n".utf8))
        try queue.rekey(using: provider(args[3]))
        FileHandle.standardOutput.write(Data("done\n".utf8))
    } catch {
        FileHandle.standardError.write(Data("rekeyer: \(error)\n".utf8))
        exit(5)
    }
case "migrate-and-hang", "migrate-and-stop":
    // migrate-and-hang|migrate-and-stop DB HEXKEY: migrates with "first" (a table a) and "second" (table b,
    // 1000 rows). migrate-and-hang then prints "migrating" and sleeps inside the second migration's
    // transaction until killed; migrate-and-stop prints "migrated" once both are committed and sleeps until
    // killed.
    let args = Array(arguments)
    guard args.count == 3 else { exit(64) }
    let hangsInside = scenario == "migrate-and-hang"
    var migrator = FMDatabaseMigrator()
    migrator.registerMigration("first") { db in try db.executeUpdate("CREATE TABLE a (x)", values: nil) }
    migrator.registerMigration("second") { db in
        try db.executeUpdate("CREATE TABLE b (x)", values: nil)
        for i in 0..<1000 { try db.executeUpdate("INSERT INTO b VALUES (?)", values: [i]) }
        if hangsInside {
            say("migrating")
            while true { sleep(60) }
        }
    }
    do {
        let queue = try FMDatabaseQueue(path: args[1], keyProvider: try RawKeyProvider(material: material(args[2])))
        try migrator.migrate(queue)
    } catch {
        exit(4)
    }
    say("migrated")
    while true { sleep(60) }
case "migrate-race":
    // migrate-race DB HEXKEY: prints "ready", waits for a line on standard input (so two processes start
    // together), then migrates with "m0" (a table log) and "m1"..."m5", each logging its name and this
    // process's id in log and writing 200 rows; prints "migrated".
    let args = Array(arguments)
    guard args.count == 3 else { exit(64) }
    var migrator = FMDatabaseMigrator()
    let pid = Int(getpid())
    migrator.registerMigration("m0") { db in
        try db.executeUpdate("CREATE TABLE log (name TEXT, pid INTEGER)", values: nil)
        try db.executeUpdate("INSERT INTO log VALUES ('m0', ?)", values: [pid])
    }
    for index in 1...5 {
        migrator.registerMigration("m\(index)") { db in
            try db.executeUpdate("INSERT INTO log VALUES (?, ?)", values: ["m\(index)", pid])
            try db.executeUpdate("CREATE TABLE rows\(index) (x)", values: nil)
            for i in 0..<200 { try db.executeUpdate("INSERT INTO rows\(index) VALUES (?)", values: [i]) }
        }
    }
    do {
        // The other process holds the write lock while it migrates: wait for it as long as it takes.
        let queue = try FMDatabaseQueue(
            path: args[1],
            configuration: FMDatabaseConfiguration(
                keyProvider: try RawKeyProvider(material: material(args[2])), busyTimeout: 60))
        say("ready")
        _ = readLine()
        try migrator.migrate(queue)
    } catch {
        FileHandle.standardError.write(Data("migrate-race: \(error)\n".utf8))
        exit(4)
    }
    say("migrated")
case "hold":
    // hold DB HEXKEY read|write [passphrase]: opens the database with the key and holds a read transaction (a
    // SELECT stepped once and left open) or a write transaction (BEGIN IMMEDIATE + an INSERT), prints
    // "holding", and keeps it until standard input closes; then ends it and prints "released".
    guard arguments.count >= 4 else { exit(64) }
    let args = Array(arguments)
    let db = FMDatabase(path: args[1])
    db.logsErrors = false
    guard db.open() else { exit(3) }
    do {
        // A fifth argument "passphrase": the key is a passphrase (as fmdb-cipher's default KDF), not raw.
        if args.count > 4, args[4] == "passphrase" {
            try db.setKey(using: PassphraseKeyProvider(args[2]))
        } else {
            try db.setKey(using: RawKeyProvider(material: material(args[2])))
        }
    } catch {
        exit(4)
    }
    db.maxBusyRetryTimeInterval = 10
    var reader: FMResultSet?
    if args[3] == "write" {
        guard db.beginImmediateTransaction(), db.executeUpdate("INSERT INTO t VALUES (-1)") else { exit(5) }
    } else {
        guard db.beginDeferredTransaction(), let rs = db.executeQuery("SELECT * FROM t"), rs.next() else { exit(6) }
        reader = rs
    }
    say("holding")
    _ = FileHandle.standardInput.readDataToEndOfFile()
    reader?.close()
    db.rollback()
    db.close()
    say("released")
case "transaction-fault":
    // transaction-fault DB FOLDER FORM: runs, in the transaction form FORM, a block that inserts a row, then a
    // row large enough to make SQLite write pages while the transaction is open (a one-page cache), then
    // another row whose result it does not look at. The large row's writes are the first ones under FOLDER the
    // fault shim counts: FMDB_FAULT_DIR is set to FOLDER only around that statement. Prints "reported=CODE
    // rolledBack=0|1 fault=CODE later=CODE rows=N": the form's error (0: none), the large row's and the later
    // row's codes, and the rows committed; the forms "migrator(queue)" and "migrator(pool)" add "recorded=1"
    // when it recorded the migration.
    guard arguments.count >= 4 else { exit(64) }
    let args = Array(arguments)
    let (path, folder, form) = (args[1], args[2], args[3])
    final class Seen: @unchecked Sendable {
        var fault: Int32 = 0
        var later: Int32 = 0
        var reported: Error?
        var recorded = 0
    }
    let seen = Seen()
    // A fifth argument "commit": the block only inserts two small rows, and the fault meets the form's COMMIT.
    let atCommit = args.count > 4 && args[4] == "commit"
    let block: @Sendable (FMDatabase) -> Void = { db in
        db.logsErrors = false
        guard db.executeStatements("pragma cache_size = 1"), db.executeUpdate("insert into t values (1)") else {
            exit(5)
        }
        if atCommit {
            if !db.executeUpdate("insert into t values (2)") { seen.later = db.lastExtendedErrorCode() }
            setenv("FMDB_FAULT_DIR", folder, 1)  // unset by the process's end: every write of the COMMIT counts
            return
        }
        setenv("FMDB_FAULT_DIR", folder, 1)
        if !db.executeUpdate("insert into t values (zeroblob(400000))") { seen.fault = db.lastErrorCode() }
        unsetenv("FMDB_FAULT_DIR")
        if !db.executeUpdate("insert into t values (3)") { seen.later = db.lastExtendedErrorCode() }
    }
    func awaiting(_ body: @escaping @Sendable () async throws -> Void) -> Error? {
        let done = DispatchSemaphore(value: 0)
        let box = Seen()
        Task.detached {
            do { try await body() } catch { box.reported = error }
            done.signal()
        }
        done.wait()
        return box.reported
    }
    switch form {
    case "database.inTransaction", "database.inSavePoint":
        let db = FMDatabase(path: path)
        guard db.open() else { exit(3) }
        if form == "database.inTransaction" {
            do { try db.inTransaction(.immediate) { block($0) } } catch { seen.reported = error }
        } else {
            seen.reported = db.inSavePoint { _ in block(db) }
        }
        db.close()
    case let form where form.hasPrefix("queue."):
        guard let queue = try? FMDatabaseQueue(path: path, configuration: .init(logsErrors: false)) else { exit(3) }
        switch form {
        case "queue.inTransaction": queue.inTransaction { db, _ in block(db) }
        case "queue.inDeferredTransaction": queue.inDeferredTransaction { db, _ in block(db) }
        case "queue.inExclusiveTransaction": queue.inExclusiveTransaction { db, _ in block(db) }
        case "queue.inImmediateTransaction": queue.inImmediateTransaction { db, _ in block(db) }
        case "queue.inSavePoint": seen.reported = queue.inSavePoint { db, _ in block(db) }
        case "queue.inTransaction(kind)":
            do { try queue.inTransaction(.deferred, block) } catch { seen.reported = error }
        case "queue.performTransaction":
            seen.reported = awaiting { try await queue.performTransaction(.immediate, block) }
        default: exit(64)
        }
        // FMDB's block forms leave their error in `lastError`.
        if form.hasSuffix("Transaction"), !form.hasSuffix("performTransaction") { seen.reported = queue.lastError }
        queue.close()
    case let form where form.hasPrefix("pool."):
        guard let pool = try? FMDatabasePool(path: path, configuration: .init(logsErrors: false)) else { exit(3) }
        switch form {
        case "pool.inTransaction": pool.inTransaction { db, _ in block(db) }
        case "pool.inDeferredTransaction": pool.inDeferredTransaction { db, _ in block(db) }
        case "pool.inExclusiveTransaction": pool.inExclusiveTransaction { db, _ in block(db) }
        case "pool.inImmediateTransaction": pool.inImmediateTransaction { db, _ in block(db) }
        case "pool.inSavePoint": seen.reported = pool.inSavePoint { db, _ in block(db) }
        case "pool.inTransaction(kind)":
            do { try pool.inTransaction(.exclusive, block) } catch { seen.reported = error }
        case "pool.performTransaction":
            seen.reported = awaiting { try await pool.performTransaction(.deferred, block) }
        default: exit(64)
        }
        if form.hasSuffix("Transaction"), !form.hasSuffix("performTransaction") { seen.reported = pool.lastError }
        pool.releaseAllDatabases()
    case "migrator(queue)", "migrator(pool)":
        var migrator = FMDatabaseMigrator()
        migrator.registerMigration("fill") { db in block(db) }
        if form == "migrator(queue)" {
            guard let queue = try? FMDatabaseQueue(path: path, configuration: .init(logsErrors: false)) else { exit(3) }
            do { try migrator.migrate(queue) } catch { seen.reported = error }
            if (try? migrator.appliedMigrations(queue)) != [] { seen.recorded = 1 }
            queue.close()
        } else {
            guard let pool = try? FMDatabasePool(path: path, configuration: .init(logsErrors: false)) else { exit(3) }
            do { try migrator.migrate(pool) } catch { seen.reported = error }
            if (try? migrator.appliedMigrations(pool)) != [] { seen.recorded = 1 }
            pool.releaseAllDatabases()
        }
    default:
        exit(64)
    }
    let reader = FMDatabase(path: path)
    guard reader.open() else { exit(3) }
    let reported = seen.reported as? FMDatabaseError
    say(
        "reported=\(reported?.extendedCode ?? (seen.reported == nil ? 0 : -1))"
            + " rolledBack=\(reported?.transactionWasRolledBack == true ? 1 : 0) fault=\(seen.fault)"
            + " later=\(seen.later) rows=\(reader.int(forQuery: "select count(*) from t"))"
            + (seen.recorded == 1 ? " recorded=1" : ""))
    reader.close()
case "service":
    // service DB KEYFILE slot|raw: a long-running service on a keyed WAL pool (at most 4 connections). Its key
    // comes from KEYFILE (a slot passphrase, or a raw key in hex), read again whenever the pool finds the file
    // under a key it does not hold (ReloadableKeyProvider). Two writer threads insert numbered rows into
    // `acks` in immediate transactions and print "ack ID" once the commit returned; two reader threads read
    // a row and count. Each failed request prints "fail read|write CODE MESSAGE". Prints "rss-warm KB requests
    // N" once warm (500 acks in, three connections open) and runs until standard input closes; then prints
    // "rss-end KB", "requests N" and "stopped". The two-process load test runs the operator's fmdb-cipher
    // commands beside it.
    let args = Array(arguments)
    guard args.count == 4, args[3] == "slot" || args[3] == "raw" else { exit(64) }
    let keyFile = args[2]
    let slotted = args[3] == "slot"
    let output = NSLock()
    let report: @Sendable (String) -> Void = { line in
        output.withLock { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    }
    let residentKiB: @Sendable () -> Int = {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    let pool: FMDatabasePool
    do {
        let provider = try ReloadableKeyProvider {
            // Test keys, not secrets: read as text, as the helper's other scenarios take theirs.
            let text = try String(contentsOfFile: keyFile, encoding: .utf8).trimmingCharacters(in: .newlines)
            if slotted { return KeySlotKeyProvider(secret: .passphrase(text)) }
            return try RawKeyProvider(material: material(text))
        }
        pool = try FMDatabasePool(
            path: args[1],
            configuration: FMDatabaseConfiguration(
                keyProvider: provider, logsErrors: false, busyTimeout: 10, maximumNumberOfDatabasesToCreate: 4))
        try pool.inDatabase { db in
            try db.executeUpdate("CREATE TABLE IF NOT EXISTS acks (id INTEGER PRIMARY KEY, payload BLOB)", values: nil)
        }
    } catch {
        FileHandle.standardError.write(Data("service: \(error)\n".utf8))
        exit(4)
    }
    final class Counters: @unchecked Sendable {
        // @unchecked Sendable: every property is read and written under `lock`.
        let lock = NSLock()
        var nextID = 0
        var acks = 0
        var requests = 0
        var warm = false
        var stopping = false
    }
    let counters = Counters()
    // Threads of their own: Dispatch's global queue starts about one thread per core and cannot tell that a
    // worker waiting in SQLite's busy handler is blocked, so readers could wait behind writers forever.
    let workers = DispatchGroup()
    for worker in 0..<4 {
        let writes = worker < 2
        workers.enter()
        Thread {
            defer { workers.leave() }
            while !counters.lock.withLock({ counters.stopping }) {
                do {
                    if writes {
                        let id = counters.lock.withLock {
                            counters.nextID += 1
                            return counters.nextID
                        }
                        try pool.inTransaction(.immediate) { db in
                            try db.executeUpdate("INSERT INTO acks VALUES (?, randomblob(100))", values: [id])
                        }
                        report("ack \(id)")
                        // Warm: 500 writes in, and the pool at the size this load keeps it (two readers and the
                        // writer whose turn it is: writers take turns at the write gate), its caches filled.
                        let warm: Int? = counters.lock.withLock {
                            counters.acks += 1
                            guard !counters.warm, counters.acks >= 500,
                                pool.countOfOpenDatabases >= 3 || counters.acks >= 2000
                            else { return nil }
                            counters.warm = true
                            return counters.requests
                        }
                        if let warm { report("rss-warm \(residentKiB()) requests \(warm)") }
                    } else {
                        try pool.inDatabase { db in
                            let rows = try db.executeQuery("SELECT count(*), max(id) FROM acks", values: nil)
                            defer { rows.close() }
                            _ = try rows.nextWithError()
                        }
                    }
                } catch {
                    let code = (error as NSError).code
                    let message =
                        ((error as? FMDatabaseError).map { "[\($0.extendedCode)] \($0.sql ?? "-") " } ?? "")
                        + ((error as? FMDatabaseError)?.message ?? "\(error)")
                    report("fail \(writes ? "write" : "read") \(code) \(message)")
                }
                counters.lock.withLock { counters.requests += 1 }
            }
        }.start()
    }
    _ = FileHandle.standardInput.readDataToEndOfFile()
    counters.lock.withLock { counters.stopping = true }
    workers.wait()
    report("rss-end \(residentKiB())")
    report("requests \(counters.lock.withLock { counters.requests })")
    report("stopped")
case "wrong-key":
    // wrong-key PATH KEY fmdb|sql: the first keyed open of the process, with FMDB's setKey(_:) or SQL
    // `PRAGMA key`, then a query; prints the query's error code (SQLCipher's log goes to standard error).
    let values = Array(arguments.dropFirst())
    guard values.count == 3 else { exit(64) }
    let db = FMDatabase(path: values[0])
    db.logsErrors = false
    guard db.open() else { exit(3) }
    if values[2] == "sql" {
        _ = db.executeStatements("PRAGMA key = '\(values[1])'")
    } else {
        _ = db.setKey(values[1])
    }
    let rs = db.executeQuery("SELECT count(*) FROM sqlite_master")
    rs?.close()
    say("code \(db.lastErrorCode())")
    db.close()
case "prompt-with-handler":
    // A program's own SIGTERM handler (as the tool's partial-output cleanup), then a terminal prompt: a
    // SIGTERM at the prompt must restore echo, then run this handler, which reports what it saw and exits 77.
    promptTerminal = open("/dev/tty", O_RDWR | O_NOCTTY)
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in
        var state = termios()
        let echoOn = tcgetattr(promptTerminal, &state) == 0 && state.c_lflag & tcflag_t(ECHO) != 0
        if echoOn {
            _ = write(STDOUT_FILENO, "handler: echo on\n", 17)
        } else {
            _ = write(STDOUT_FILENO, "handler: echo off\n", 18)
        }
        _exit(77)
    }
    sigemptyset(&action.sa_mask)
    sigaction(SIGTERM, &action, nil)
    _ = try? KeyMaterial.read(from: .terminal(prompt: "Key: "))
    say("not reached")
default:
    FileHandle.standardError.write(Data("unknown scenario \(scenario)\n".utf8))
    exit(64)
}
