import Foundation

/// The storage class of a value, as `sqlite3_column_type` and `sqlite3_value_type` report it.
public enum SqliteValueType: Int32, Sendable {
    /// `SQLITE_INTEGER`: a signed integer of up to 8 bytes.
    case integer = 1
    /// `SQLITE_FLOAT`: an 8-byte IEEE floating point number.
    case float = 2
    /// `SQLITE_TEXT`: a string, stored as UTF-8 here.
    case text = 3
    /// `SQLITE_BLOB`: bytes, stored exactly as given.
    case blob = 4
    /// `SQLITE_NULL`: no value.
    case null = 5
}
