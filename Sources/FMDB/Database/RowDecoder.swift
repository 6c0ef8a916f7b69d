import Foundation

/// Decodes rows of one statement, kept by the result set across rows (dropped on close and on a new
/// bind: a statement SQLite prepares again after a schema change may have other columns).
///
/// Keys find their columns through a plan by request position, checked by name: a synthesized
/// `init(from:)` asks for its keys in the same order at every row, so a property costs one string
/// comparison (equal literals compare by their bits), and a key asked in another order is looked up
/// again (``FMResultSet/columnIndex(forName:)``'s rules: exact name first, then case-insensitively).
/// Each column is read through one `ColumnValue`: one `sqlite3_column_value` call, then its type and
/// contents.
///
/// The containers it hands out hold it strongly and read only while `isDecoding`: one kept past its
/// `init(from:)`, or used after its result set was closed, throws `SQLITE_MISUSE` instead of reading a row
/// that has moved on or a statement that is gone.
///
/// Not Sendable: used on the result set's thread only.
final class RowDecoder: Decoder {
    let statement: Statement
    let dateFormatter: DateFormatter?
    /// The statement's handle (read only while `isDecoding`: the result set is on a row).
    let handle: OpaquePointer
    // `@exclusivity(unchecked)`: one decoder is used by one result set on one thread, and none of these is
    // ever accessed re-entrantly; the dynamic checks cost about 400 instructions a row of five properties
    // (callgrind, W2 through Codable), more than the column reads.
    @exclusivity(unchecked) private var typeName: Any.Type = Any.self
    /// Set while `FMResultSet.decode` runs.
    @exclusivity(unchecked) private(set) var isDecoding = false
    /// Per request position: the key asked for and its column (-1: the query has no such column).
    @exclusivity(unchecked) private var plan: [(name: String, index: Int32)] = []
    @exclusivity(unchecked) private var cursor = 0
    /// The keyed containers handed out, one per key type (each a `KeyedDecodingContainer<Key>` of the key
    /// type named beside it), kept across rows: making one costs an allocation and three type lookups,
    /// finding it here one cast (callgrind). Each holds this decoder: `retire()` lets them go.
    @exclusivity(unchecked) private var containers: [(keyType: ObjectIdentifier, container: Any)] = []

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(statement: Statement, handle: OpaquePointer, dateFormatter: DateFormatter?) {
        self.statement = statement
        self.handle = handle
        self.dateFormatter = dateFormatter
    }

    /// Starts decoding the current row (a row with at least one column).
    func begin(type: Any.Type) {
        typeName = type
        cursor = 0
        isDecoding = true
    }

    func end() { isDecoding = false }

    /// Called when the result set lets the decoder go (closed, or bound again): containers still
    /// referenced (kept by an `init(from:)` past its return, or an `init(from:)` that closed its own result
    /// set) throw from then on.
    func retire() {
        isDecoding = false
        containers = []
    }

    /// The error for a container or column decoder used after its `init(from:)` returned.
    func escaped() -> FMDatabaseError {
        FMDatabaseError.misuse(
            "A decoding container was used after its init(from:) returned or its result set was closed: "
                + "decode the row again instead",
            sql: statement.sql)
    }

    // MARK: Columns

    /// The column named `name` (a coding key's string value), or -1 when the query has none by that name.
    /// Throws when no row is being decoded.
    func column(named name: String) throws -> Int32 {
        guard isDecoding else { throw escaped() }
        let position = cursor
        cursor += 1
        if position < plan.count, plan[position].name == name { return plan[position].index }
        return resolve(name, at: position)
    }

    private func resolve(_ name: String, at position: Int) -> Int32 {
        let index = statement.columnIndex(forName: name)
        if position < plan.count {
            plan[position] = (name, index)
        } else if position == plan.count {
            plan.append((name, index))
        }
        return index
    }

    /// Column `index`'s value in the current row (only while `isDecoding`).
    func read(_ index: Int32) -> ColumnValue { ColumnValue(handle, index) }

    /// The number of columns of the current row.
    var columnCount: Int32 { statement.columnCount }

    // MARK: Errors

    func failure(_ message: String) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISMATCH, message: message, sql: statement.sql)
    }

    func missingColumn(_ name: String) -> FMDatabaseError {
        failure("No column named '\(name)' in the result, needed to decode \(typeName)")
    }

    private func storageName(_ index: Int32) -> String {
        switch read(index).type {
        case SQLITE_INTEGER: return "INTEGER"
        case SQLITE_FLOAT: return "REAL"
        case SQLITE_TEXT: return "TEXT"
        case SQLITE_BLOB: return "BLOB"
        default: return "NULL"
        }
    }

    private func columnLabel(_ index: Int32) -> String {
        "column '\(statement.columnName(index) ?? String(index))'"
    }

    func mismatch(_ index: Int32, _ type: Any.Type) -> FMDatabaseError {
        let found = storageName(index)
        if found == "NULL" {
            return failure("Cannot decode \(columnLabel(index)) as \(type): it is NULL (make the property optional)")
        }
        return failure("Cannot decode \(columnLabel(index)) as \(type): it holds \(found)")
    }

    func outOfRange(_ index: Int32, _ type: Any.Type) -> FMDatabaseError {
        failure("Cannot decode \(columnLabel(index)) as \(type): its value is out of the type's range")
    }

    // MARK: Values (`value` is column `index` of the current row; the index names it in errors)

    func integer<I: FixedWidthInteger>(_ type: I.Type, _ value: ColumnValue, _ index: Int32) throws -> I {
        switch value.type {
        case SQLITE_INTEGER:
            guard let result = I(exactly: value.int64) else { throw outOfRange(index, I.self) }
            return result
        case SQLITE_FLOAT:
            let double = value.double
            guard double.rounded(.towardZero) == double else { throw mismatch(index, I.self) }
            guard let result = I(exactly: double) else { throw outOfRange(index, I.self) }
            return result
        default:
            throw mismatch(index, I.self)
        }
    }

    /// `integer(_:_:_:)` for the usual integer properties, without the generic code's calls.
    func int64(_ value: ColumnValue, _ index: Int32) throws -> Int64 {
        if value.type == SQLITE_INTEGER { return value.int64 }
        return try integer(Int64.self, value, index)
    }

    func int(_ value: ColumnValue, _ index: Int32) throws -> Int {
        if value.type == SQLITE_INTEGER, let result = Int(exactly: value.int64) { return result }
        return try integer(Int.self, value, index)
    }

    func double(_ value: ColumnValue, _ index: Int32, as type: Any.Type = Double.self) throws -> Double {
        switch value.type {
        case SQLITE_INTEGER, SQLITE_FLOAT: return value.double
        default: throw mismatch(index, type)
        }
    }

    func bool(_ value: ColumnValue, _ index: Int32) throws -> Bool {
        guard value.type == SQLITE_INTEGER else { throw mismatch(index, Bool.self) }
        return value.int64 != 0
    }

    func string(_ value: ColumnValue, _ index: Int32, as type: Any.Type = String.self) throws -> String {
        guard value.type == SQLITE_TEXT, let text = value.string else { throw mismatch(index, type) }
        return text
    }

    func data(_ value: ColumnValue, _ index: Int32) throws -> Data {
        switch value.type {
        case SQLITE_BLOB, SQLITE_TEXT: return value.data
        default: throw mismatch(index, Data.self)
        }
    }

    func date(_ value: ColumnValue, _ index: Int32) throws -> Date {
        switch value.type {
        case SQLITE_INTEGER, SQLITE_FLOAT:
            return Date(timeIntervalSince1970: value.double)
        case SQLITE_TEXT:
            guard let dateFormatter else {
                throw failure(
                    "Cannot decode \(columnLabel(index)) as Date: it holds TEXT and the database has "
                        + "no date format (FMDatabase.setDateFormat(_:)); without one dates are numbers")
            }
            guard let text = value.string, let date = dateFormatter.date(from: text) else {
                throw failure(
                    "Cannot decode \(columnLabel(index)) as Date: its text does not match the "
                        + "database's date format")
            }
            return date
        default:
            throw mismatch(index, Date.self)
        }
    }

    func url(_ value: ColumnValue, _ index: Int32) throws -> URL {
        guard let url = URL(string: try string(value, index, as: URL.self)) else {
            throw failure("Cannot decode \(columnLabel(index)) as URL: its text is not a URL")
        }
        return url
    }

    /// Any `Decodable` from column `index`.
    func value<T: Decodable>(_ type: T.Type, _ index: Int32) throws -> T {
        try value(type, read(index), index)
    }

    /// Any `Decodable` from one column: the types whose own `Codable` form is not how a column holds them
    /// (`Date`'s is seconds since 2001), then the type's own `init(from:)` over the column (scalars, enums
    /// by raw value, `Optional`, `UUID`, `Decimal`), then JSON text.
    func value<T: Decodable>(_ type: T.Type, _ value: ColumnValue, _ index: Int32) throws -> T {
        // `as!` where T is the very type compared with: the cast cannot fail, and unlike `as?` it needs no
        // `Optional<T>` type metadata (a hash lookup in unspecialised code, about 400 instructions).
        if T.self == Data.self { return try data(value, index) as! T }
        if T.self == Date.self { return try date(value, index) as! T }
        if T.self == URL.self { return try url(value, index) as! T }
        do {
            return try T(from: ColumnDecoder(row: self, index: index))
        } catch is ColumnDecoder.NeedsJSON {
            return try json(T.self, index)
        } catch let error as FMDatabaseError {
            throw error
        } catch {
            throw failure("Cannot decode \(columnLabel(index)) as \(T.self): \(FMResultSet.describe(error))")
        }
    }

    private func json<T: Decodable>(_ type: T.Type, _ index: Int32) throws -> T {
        let value = read(index)
        let kind = value.type
        guard kind == SQLITE_TEXT || kind == SQLITE_BLOB else { throw mismatch(index, T.self) }
        do {
            return try JSONDecoder().decode(T.self, from: value.data)
        } catch {
            throw failure(
                "Cannot decode \(columnLabel(index)) as \(T.self) from JSON text: "
                    + FMResultSet.describe(error))
        }
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let keyType = ObjectIdentifier(Key.self)
        for entry in containers where entry.keyType == keyType {
            // Stored for this very key type, so the cast cannot fail; `as?` would also look the type
            // metadata of `Optional<KeyedDecodingContainer<Key>>` up (unspecialised code, ~400 instructions).
            return entry.container as! KeyedDecodingContainer<Key>
        }
        let container = KeyedDecodingContainer(RowKeyedContainer<Key>(row: self))
        containers.append((keyType, container))
        return container
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw failure(
            "Cannot decode \(typeName) from a row as a list: decode a type with properties named "
                + "after the columns")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard columnCount > 0 else { throw failure("The row has no column to decode \(typeName) from") }
        return ColumnDecoder(row: self, index: 0)
    }
}
