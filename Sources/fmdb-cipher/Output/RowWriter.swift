import FMDB
import Foundation

/// Streams result sets as CSV, JSON, JSON lines or an aligned table, a row at a time: memory does not grow
/// with the number of rows (the table keeps its first `tableSampleRows` rows to size the columns).
final class RowWriter {
    enum Format { case table, csv, json, jsonl }

    /// Rows the aligned table reads before it fixes the column widths and streams the rest.
    static let tableSampleRows = 1000

    private let format: Format
    private let out: OutputBuffer
    /// Rows of the statement whose JSON array is open (nil: none is).
    private var jsonRows: Int?

    /// A writer to `fd` (standard output unless `sql --output`).
    init(format: Format, fd: Int32 = STDOUT_FILENO) {
        self.format = format
        out = OutputBuffer(fd: fd)
    }

    /// Writes every row of `rs` (nothing for a statement without columns).
    func write(_ rs: FMResultSet) throws {
        let count = rs.columnCount
        guard count > 0 else { return }
        let names = (0..<count).map { rs.columnName(for: $0) ?? "" }
        switch format {
        case .csv: try writeCSV(rs, names)
        case .json, .jsonl: try writeJSON(rs, names)
        case .table: try writeTable(rs, names)
        }
    }

    /// Closes an open JSON array (also after an error, so the output stays valid JSON) and writes out.
    func finish() throws {
        closeJSONArray()
        try out.flush()
    }

    private func closeJSONArray() {
        guard let rows = jsonRows else { return }
        out.append(rows > 0 ? "\n]\n" : "]\n")
        jsonRows = nil
    }

    // MARK: CSV (RFC 4180; NULL is empty, BLOBs x'hex' as in every format)

    private func writeCSV(_ rs: FMResultSet, _ names: [String]) throws {
        for (i, name) in names.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            var name = name
            name.withUTF8 { csvField($0) }
        }
        out.append(UInt8(ascii: "\n"))
        let count = Int32(names.count)
        while try rs.nextWithError() {
            for i in 0..<count {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                switch rs.type(forColumnIndex: i) {
                case .null: break
                case .integer: out.append(rs.longLongInt(forColumnIndex: i))
                case .float: out.append(String(rs.double(forColumnIndex: i)))
                case .text:
                    if let text = rs.utf8String(forColumnIndex: i) {
                        csvField(UnsafeBufferPointer(start: text, count: strlen(text)))
                    }
                case .blob: appendHex(rs.dataNoCopy(forColumnIndex: i))
                }
            }
            out.append(UInt8(ascii: "\n"))
            try out.flushIfFull()
        }
    }

    private func csvField(_ text: UnsafeBufferPointer<UInt8>) {
        let needsQuotes = text.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 10 || $0 == 13 }
        guard needsQuotes else {
            if let base = text.baseAddress { out.append(base, count: text.count) }
            return
        }
        out.append(UInt8(ascii: "\""))
        for byte in text {
            if byte == UInt8(ascii: "\"") { out.append(byte) }
            out.append(byte)
        }
        out.append(UInt8(ascii: "\""))
    }

    private func appendHex(_ data: Data?) {
        out.append("x'")
        if let data { Hex.encode(data) { out.append($0) } }
        out.append(UInt8(ascii: "'"))
    }

    // MARK: JSON and JSON lines (numbers, strings, null; BLOBs as the string "x'hex'")

    /// JSON: one array per statement that returns columns (`[]` for no rows), each closed before the next
    /// statement's opens, as sqlite3's shell does in `.mode json`; JSON lines: one object per row.
    private func writeJSON(_ rs: FMResultSet, _ names: [String]) throws {
        if format == .json {
            closeJSONArray()
            out.append(UInt8(ascii: "["))
            jsonRows = 0
        }
        // A name that appears twice keeps its last value, as a JSON object (and JSONSerialization) would.
        let keep = names.indices.filter { i in !names[(i + 1)...].contains(names[i]) }
        let keys = keep.map { i -> [UInt8] in
            let key = OutputBuffer.jsonString(names[i])
            return key + [UInt8(ascii: ":")]
        }
        while try rs.nextWithError() {
            if let rows = jsonRows {
                out.append(rows == 0 ? "\n" : ",\n")
                jsonRows = rows + 1
            }
            out.append(UInt8(ascii: "{"))
            for (n, i) in keep.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                keys[n].withUnsafeBufferPointer { if let base = $0.baseAddress { out.append(base, count: $0.count) } }
                let column = Int32(i)
                switch rs.type(forColumnIndex: column) {
                case .null: out.append("null")
                case .integer: out.append(rs.longLongInt(forColumnIndex: column))
                case .float:
                    let value = rs.double(forColumnIndex: column)
                    out.append(value.isFinite ? String(value) : "\"\(value)\"")
                case .text:
                    if let text = rs.utf8String(forColumnIndex: column) {
                        out.appendJSONString(UnsafeBufferPointer(start: text, count: strlen(text)))
                    }
                case .blob:
                    out.append(UInt8(ascii: "\""))
                    appendHex(rs.dataNoCopy(forColumnIndex: column))
                    out.append(UInt8(ascii: "\""))
                }
            }
            out.append(UInt8(ascii: "}"))
            if format == .jsonl { out.append(UInt8(ascii: "\n")) }
            try out.flushIfFull()
        }
    }

    // MARK: Aligned table

    private func writeTable(_ rs: FMResultSet, _ names: [String]) throws {
        let count = Int32(names.count)
        func cells() -> [String] { (0..<count).map { CellValue(rs, $0).display } }
        var sample: [[String]] = []
        var more = false
        while try rs.nextWithError() {
            sample.append(cells())
            if sample.count == Self.tableSampleRows {
                more = true
                break
            }
        }
        var widths = names.map(\.count)
        for row in sample {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ row: [String]) {
            var text = ""
            for (i, cell) in row.enumerated() {
                if i > 0 { text += "  " }
                text += cell
                if i < row.count - 1, cell.count < widths[i] {
                    text += String(repeating: " ", count: widths[i] - cell.count)
                }
            }
            while text.last == " " { text.removeLast() }
            out.append(text)
            out.append(UInt8(ascii: "\n"))
        }
        line(names)
        out.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        out.append(UInt8(ascii: "\n"))
        for row in sample { line(row) }
        sample = []
        // Past the sample the widths stay: a longer cell is printed whole and pushes its row out of line.
        if more {
            while try rs.nextWithError() {
                line(cells())
                try out.flushIfFull()
            }
        }
        try out.flushIfFull()
    }
}
