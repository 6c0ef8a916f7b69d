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

    init(_ stmt: OpaquePointer, _ index: Int32) {
        value = sqlite3_column_value(stmt, index)
    }

    /// `SQLITE_INTEGER`, `SQLITE_FLOAT`, `SQLITE_TEXT`, `SQLITE_BLOB` or `SQLITE_NULL`.
    var type: Int32 { value.map { sqlite3_value_type($0) } ?? SQLITE_NULL }

    var int64: Int64 { value.map { sqlite3_value_int64($0) } ?? 0 }

    var double: Double { value.map { sqlite3_value_double($0) } ?? 0 }

    /// The text with its full byte length (embedded NULs kept; invalid UTF-8 repaired with U+FFFD);
    /// nil for NULL.
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
    var data: Data {
        guard let value, let bytes = sqlite3_value_blob(value) else { return Data() }
        return Data(bytes: bytes, count: Int(sqlite3_value_bytes(value)))
    }
}
