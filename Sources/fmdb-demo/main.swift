// A short tour of FMDBCipher: an encrypted database with a passphrase, rows written and read back,
// proof that the file holds no plaintext, and a wrong passphrase refused with a clear message.
//
// Run it with `Scripts/demo`. The passphrase comes from FMDB_DEMO_PASSPHRASE (never the command line).
import FMDB
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("demo: \(message)\n".utf8))
    exit(1)
}

let passphrase = ProcessInfo.processInfo.environment["FMDB_DEMO_PASSPHRASE"] ?? "correct horse battery staple"
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fmdb-demo-\(UUID().uuidString)")
do {
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
} catch {
    fail("cannot create \(folder.path): \(error)")
}
defer { try? FileManager.default.removeItem(at: folder) }
let path = folder.appendingPathComponent("diary.sqlite").path
let secret = "Meet me at the old mill at midnight"

print("FMDBCipher demo — SQLite \(FMDatabase.sqliteLibVersion()), FMDB API \(FMDatabase.fmdbUserVersion())")
print("1. Creating an encrypted database at \(path)")
let db = FMDatabase(path: path)
guard db.open() else { fail(db.lastErrorMessage()) }
do {
    try db.setKey(using: PassphraseKeyProvider(passphrase))
} catch {
    fail("keying failed: \(error)")
}
print("   SQLCipher \(db.cipherVersion ?? "?") with \(db.cipherProvider ?? "?")")
db.executeUpdate("CREATE TABLE entries (id INTEGER PRIMARY KEY, day TEXT, note TEXT)")
db.beginTransaction()
db.executeUpdate("INSERT INTO entries (day, note) VALUES (?, ?)", "Monday", secret)
db.executeUpdate("INSERT INTO entries (day, note) VALUES (?, ?)", "Tuesday", "Bought bread")
db.executeUpdate(withFormat: "INSERT INTO entries (day, note) VALUES (\("Wednesday"), \("Nothing happened"))")
guard db.commit() else { fail(db.lastErrorMessage()) }

print("2. Reading the rows back with the passphrase:")
if let rs = db.executeQuery("SELECT day, note FROM entries ORDER BY id") {
    while rs.next() {
        print("   \(rs.string(forColumn: "day") ?? "") — \(rs.string(forColumn: "note") ?? "")")
    }
}
db.close()

print("3. Looking at the file's bytes:")
guard let bytes = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
let header = bytes.prefix(16)
let plaintextHeader = Data("SQLite format 3\u{0}".utf8)
print("   size \(bytes.count) bytes, first 16 bytes: \(header.map { String(format: "%02x", $0) }.joined(separator: " "))")
print("   starts with \"SQLite format 3\": \(header == plaintextHeader ? "YES (not encrypted!)" : "no")")
let found = bytes.range(of: Data(secret.utf8)) != nil
print("   contains the secret note as plaintext: \(found ? "YES (not encrypted!)" : "no")")
if header == plaintextHeader || found { fail("the file is not encrypted") }

print("4. Opening it with a wrong passphrase:")
let intruder = FMDatabase(path: path)
intruder.logsErrors = false
guard intruder.open() else { fail(intruder.lastErrorMessage()) }
do {
    try intruder.setKey(using: PassphraseKeyProvider("wrong passphrase"))
    fail("a wrong passphrase was accepted")
} catch let error as NSError {
    print("   refused: \(error.localizedDescription) (domain \(error.domain), code \(error.code))")
}
intruder.close()
print("Done: the database is encrypted at rest and only the right passphrase opens it.")
