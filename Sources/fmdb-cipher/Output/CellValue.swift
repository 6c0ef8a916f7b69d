import FMDB
import Foundation

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
        case .blob(let v): return Hex.blobLiteral(v)
        }
    }
}
