import FMDB
import Foundation

/// Data goes to standard output; messages to standard error.
enum Output {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func message(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Text for a person at a terminal (a prompt), on standard error, without a newline.
    static func prompt(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Pretty, stable JSON (sorted keys) for scripts.
    static func json(_ value: Any) throws {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

/// A value of a result column, as the formats show it.
enum CellValue {
    case null, integer(Int64), real(Double), text(String), blob(Data)

    init(_ rs: FMResultSet, _ index: Int32) {
        switch rs.type(forColumnIndex: index) {
        case .null: self = .null
        case .integer: self = .integer(rs.longLongInt(forColumnIndex: index))
        case .float: self = .real(rs.double(forColumnIndex: index))
        case .text: self = .text(rs.string(forColumnIndex: index) ?? "")
        case .blob: self = .blob(rs.data(forColumnIndex: index) ?? Data())
        }
    }

    /// For tables and CSV: NULL is empty, BLOBs are x'hex'.
    var display: String {
        switch self {
        case .null: return ""
        case .integer(let v): return String(v)
        case .real(let v): return String(v)
        case .text(let v): return v
        case .blob(let v): return "x'" + v.map { String(format: "%02x", $0) }.joined() + "'"
        }
    }
}

/// A small aligned table (info's table list); `sql` streams its rows through RowWriter.
enum RowFormat {
    static func table(columns: [String], rows: [[String]]) -> [String] {
        var widths = columns.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func pad(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        return [pad(columns), widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")] + rows.map(pad)
    }
}
