// One fuzz input drives one in-memory database: the first bytes pick operations, the rest become SQL
// text, bind values, column names and indexes. Any crash, hang or sanitizer report is a bug.
import FMDB
import Foundation

/// Reads the input as a stream of small decisions.
struct Input {
    var bytes: [UInt8]
    var position = 0

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func text(max: Int) -> String {
        let count = min(Int(byte()), max, bytes.count - position)
        guard count > 0 else { return "" }
        defer { position += count }
        return String(decoding: bytes[position..<position + count], as: UTF8.self)
    }

    mutating func value() -> Any {
        switch byte() % 8 {
        case 0: return NSNull()
        case 1: return Int(Int8(bitPattern: byte())) << Int(byte() % 56)
        case 2: return Double(byte()) / Double(max(1, Int(byte())))
        case 3: return text(max: 64)
        case 4: return Data(text(max: 64).utf8)
        case 5: return Data()
        case 6: return byte() % 2 == 0
        default: return UInt64.max
        }
    }

    var isAtEnd: Bool { position >= bytes.count }
}

func fuzzOne(_ data: UnsafeRawBufferPointer) {
    var input = Input(bytes: Array(data))
    let db = FMDatabase()
    db.logsErrors = false
    guard db.open() else { return }
    db.executeStatements("CREATE TABLE t (a, b, c); INSERT INTO t VALUES (1, 'x', x'00'), (2, NULL, 3.5);")
    var resultSets: [FMResultSet] = []
    var steps = 0
    while !input.isAtEnd && steps < 64 {
        steps += 1
        switch input.byte() % 10 {
        case 0:
            db.executeUpdate(
                input.text(max: 200), withArgumentsIn: (0..<Int(input.byte() % 4)).map { _ in input.value() })
        case 1:
            if let rs = db.executeQuery(
                input.text(max: 200), withArgumentsIn: (0..<Int(input.byte() % 4)).map { _ in input.value() })
            {
                resultSets.append(rs)
            }
        case 2: if let rs = resultSets.last { _ = rs.next() }
        case 3:
            if let rs = resultSets.last {
                let name = input.text(max: 16)
                let index = Int32(Int8(bitPattern: input.byte()))
                _ = rs.object(forColumn: name); _ = rs.string(forColumnIndex: index); _ = rs.data(forColumnIndex: index)
                _ = rs.resultDictionary; _ = rs.date(forColumn: name); _ = rs.utf8String(forColumnIndex: index)
            }
        case 4: if !resultSets.isEmpty { resultSets.removeLast().close() }
        case 5: db.executeStatements(input.text(max: 200))
        case 6: db.executeUpdate(input.text(max: 200), withParameterDictionary: [input.text(max: 8): input.value()])
        case 7: _ = db.inSavePoint { rollback in rollback.pointee = ObjCBool(input.byte() % 2 == 0) }
        case 8:
            if let statement = try? db.prepareStatement(input.text(max: 200)) {
                try? statement.execute(Int(input.byte()), input.text(max: 16))
            }
        default: _ = try? db.validateSQL(input.text(max: 200))
        }
    }
    resultSets.forEach { $0.close() }
    db.close()
}

/// libFuzzer's driver (`-sanitize=fuzzer`), found at run time: SwiftPM links an executable's entry point
/// as `main`, so the fuzzer is started from there rather than by libFuzzer's own `main`.
typealias FuzzerCallback = @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
typealias FuzzerDriver =
    @convention(c) (
        UnsafeMutablePointer<Int32>, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        FuzzerCallback
    ) -> Int32

@main
struct Entry {
    static func main() {
        #if FUZZING
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "LLVMFuzzerRunDriver") else {
                FileHandle.standardError.write(Data("fmdb-fuzz: built without -sanitize=fuzzer\n".utf8))
                exit(2)
            }
            let driver = unsafeBitCast(symbol, to: FuzzerDriver.self)
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(
                driver(&argc, &argv) { data, size in
                    fuzzOne(UnsafeRawBufferPointer(start: data, count: size))
                    return 0
                })
        #else
            // Without the fuzzer runtime: replays the files given as arguments (a corpus or a crash input).
            for path in CommandLine.arguments.dropFirst() {
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                data.withUnsafeBytes(fuzzOne)
            }
        #endif
    }
}
