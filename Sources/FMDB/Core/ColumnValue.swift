import CSQLCipher
import Foundation

/// One column of the current row as SQLite's `sqlite3_value`, for the row decoder: the value is found
/// once (`sqlite3_column_value`), then its type and contents are read from it. Each `sqlite3_column_*`
/// call locates the column again and enters and leaves the connection's mutex (about 60 instructions on
/// SQLCipher 3.4.1, callgrind); `sqlite3_value_type` is a table lookup. A decoded property reads a type
/// and a value, so this halves the calls into SQLite per property.
///
/// SQLite calls the value "unprotected": it must not be read while another thread uses the connection.
/// The decoder runs on the connection's one thread (`FMDatabase` and `FMResultSet` are not Sendable), and
/// the value is read before anything else steps, resets or finalizes the statement.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/column_blob.html>
struct ColumnValue {
    private let value: OpaquePointer?

    @inline(__always)
    init(_ stmt: OpaquePointer, _ index: Int32) {
        value = sqlite3_column_value(stmt, index)
    }

    @inline(__always)
    fileprivate init(value: OpaquePointer?) {
        self.value = value
    }

    /// `SQLITE_INTEGER`, `SQLITE_FLOAT`, `SQLITE_TEXT`, `SQLITE_BLOB` or `SQLITE_NULL`.
    @inline(__always)
    var type: Int32 { value.map { sqlite3_value_type($0) } ?? SQLITE_NULL }

    @inline(__always)
    var int64: Int64 { value.map { sqlite3_value_int64($0) } ?? 0 }

    @inline(__always)
    var double: Double { value.map { sqlite3_value_double($0) } ?? 0 }

    /// The text with its full byte length (embedded NULs kept; invalid UTF-8 repaired with U+FFFD);
    /// nil for NULL.
    @inline(__always)
    var string: String? {
        guard let value, let text = sqlite3_value_text(value) else { return nil }
        let count = Int(sqlite3_value_bytes(value))
        return String(unsafeUninitializedCapacity: count) { buffer in
            guard let base = buffer.baseAddress, count > 0 else { return 0 }
            base.initialize(from: text, count: count)
            return count
        }
    }

    /// The bytes, copied (a TEXT value's UTF-8 bytes); empty for a zero-length value and for NULL.
    @inline(__always)
    var data: Data {
        guard let value, let bytes = sqlite3_value_blob(value) else { return Data() }
        return Data(bytes: bytes, count: Int(sqlite3_value_bytes(value)))
    }
}

/// Where the current row's column values are, so that a decoder reading several columns of a row asks
/// SQLite for one (`sqlite3_column_value` for column 0, about 59 instructions on SQLCipher 3.4.1 with
/// callgrind: it locates the column and enters and leaves the connection's mutex) instead of one per
/// column.
///
/// SQLite holds a row's values in consecutive registers (its `OP_ResultRow` opcode: "the registers P1
/// through P1+P2-1 contain a single row of results"), and `sqlite3_column_value(stmt, i)` returns the
/// address of register P1 + i: so column `i`'s value lies `i` times the register size after column 0's.
/// That is how SQLite works, not its documented interface, so it is proven at run time, never assumed:
/// the first time column 0's value is at a new address (a statement can produce rows from other
/// registers, as the arms of a compound SELECT with ORDER BY do), every column's value is asked for and
/// compared with the computed address, and only an address whose columns all matched is used. Rows at an
/// address that did not match (remembered, so it is not checked again at every row), and columns beyond
/// the ones proven, are read column by column through `sqlite3_column_value`.
///
/// The values are SQLite's "unprotected" ones (see `ColumnValue`), valid until the statement steps,
/// resets or is finalized: `locate(_:)` at the start of each row decoded, `leave()` when it ends or the
/// result set steps.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/column_blob.html>,
/// <https://www.sqlite.org/opcode.html>
struct RowValues {
    /// Column 0's value in the row being decoded (its address), when it is `proven`; 0 otherwise.
    private var base = 0
    /// The address proven to begin `count` values `stride` bytes apart (0: none).
    private var proven = 0
    /// The last address whose values were not where computed (0: none).
    private var refused = 0
    private var count: Int32 = 0
    private var stride = 0

    /// Finds the current row's values. `stmt` must be on a row with at least one column.
    @inline(__always)
    mutating func locate(_ stmt: OpaquePointer) {
        let first = Int(bitPattern: sqlite3_column_value(stmt, 0))
        if first != proven && first != refused { prove(stmt, first) }
        base = first == proven ? first : 0
    }

    /// Forgets the row: values are asked for column by column until the next `locate(_:)`.
    @inline(__always)
    mutating func leave() { base = 0 }

    /// Column `index`'s value in the current row of `stmt`.
    @inline(__always)
    func value(_ stmt: OpaquePointer, _ index: Int32) -> ColumnValue {
        if base != 0, UInt32(bitPattern: index) < UInt32(bitPattern: count) {
            return ColumnValue(value: OpaquePointer(bitPattern: base &+ Int(index) &* stride))
        }
        return ColumnValue(stmt, index)
    }

    /// Checks that every column's value is where `first` (column 0's) and the distance between the first
    /// two put it, and remembers `first` as proven if so, as refused if not.
    @inline(never)
    private mutating func prove(_ stmt: OpaquePointer, _ first: Int) {
        (proven, count, stride, refused) = (0, 0, 0, first)
        let columns = sqlite3_column_count(stmt)
        guard first != 0, columns > 0 else { return }
        var distance = 0
        if columns > 1 {
            distance = Int(bitPattern: sqlite3_column_value(stmt, 1)) &- first
            guard distance > 0 else { return }
            for index in 2..<columns
            where Int(bitPattern: sqlite3_column_value(stmt, index)) != first &+ Int(index) &* distance {
                return
            }
        }
        (proven, count, stride, refused) = (first, columns, distance, 0)
    }
}
