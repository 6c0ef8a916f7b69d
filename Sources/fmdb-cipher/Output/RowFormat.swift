import FMDB
import Foundation

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
