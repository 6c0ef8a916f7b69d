import Foundation

extension FMResultSet {
    /// Decodes the current row into a `Decodable` value, property by column name.
    ///
    /// Each coding key names a column (case-insensitively, as ``columnIndex(forName:)``). The columns
    /// convert as the typed getters document, with checks the getters do not make:
    ///
    /// - `Int`, `Int8` … `UInt64`: an INTEGER (or a REAL with an integral value) that fits the type;
    ///   a value out of range is an error, never truncated.
    /// - `Double`, `Float`: an INTEGER or a REAL. `String`: TEXT. `Bool`: an INTEGER, 0 is false.
    /// - `Data`: a BLOB (a zero-length BLOB is empty `Data`) or TEXT's bytes.
    /// - `Date`: an INTEGER or REAL as seconds since 1970 (FMDB's default); TEXT parsed with the
    ///   database's date format when one is set (``FMDatabase/setDateFormat(_:)``).
    /// - `URL`, `UUID`: TEXT. Enums with a raw value: by raw value.
    /// - Optionals: NULL, or a column the query does not have, is `nil`.
    /// - Any other `Decodable` (a nested struct, an array, a dictionary): the column's TEXT as JSON.
    ///
    /// Column names are resolved once per statement and kept while the result set is open, so
    /// decoding row after row costs little more than reading the same columns by index.
    ///
    /// ```swift
    /// struct Person: Decodable { var id: Int64; var name: String; var email: String? }
    /// let rs = try db.executeQuery("SELECT id, name, email FROM people", values: nil)
    /// while rs.next() {
    ///     let person = try rs.decode(Person.self)
    ///     print(person.name)
    /// }
    /// ```
    ///
    /// - Parameter type: The type to decode. A type that decodes a single value (`Int`, `String`, an
    ///   enum) reads the first column.
    /// - Returns: The decoded value.
    /// - Throws: ``FMDatabaseError`` with code 20 (`SQLITE_MISMATCH`) when a column is missing, NULL
    ///   for a non-optional property, of the wrong type or out of range — its message names the column
    ///   and the type, never the value; code 21 (`SQLITE_MISUSE`) when there is no current row.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        guard let handle = currentRowHandle, let statement = currentStatement else {
            throw FMDatabaseError.misuse(
                "There is no current row to decode \(T.self) from: call next() first.", sql: query)
        }
        let decoder: RowDecoder
        if let existing = rowDecoder {
            decoder = existing
        } else {
            decoder = RowDecoder(statement: statement, handle: handle, dateFormatter: parentDB?.dateFormatter)
            rowDecoder = decoder
        }
        decoder.begin(handle: handle, type: T.self)
        do {
            // Types whose own Codable form is not how a column holds them (Date's is seconds since 2001).
            if T.self == Date.self || T.self == Data.self || T.self == URL.self {
                guard columnCount > 0 else { throw decoder.failure("The row has no column to decode \(T.self) from") }
                return try decoder.value(T.self, 0)
            }
            return try T(from: decoder)
        } catch let error as FMDatabaseError {
            throw error
        } catch {
            throw decoder.failure("Cannot decode \(T.self) from the row: \(Self.describe(error))")
        }
    }

    /// A decoding error's kind and where it happened, without the values it may quote.
    static func describe(_ error: Error) -> String {
        guard let error = error as? DecodingError else { return "\(Swift.type(of: error))" }
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .typeMismatch(let type, let context): return "type mismatch for \(type) at '\(path(context))'"
        case .valueNotFound(let type, let context): return "no value for \(type) at '\(path(context))'"
        case .keyNotFound(let key, let context): return "no key '\(key.stringValue)' at '\(path(context))'"
        case .dataCorrupted(let context):
            // At the top (an enum's init(from:) given an unknown raw value): the value is not one of the type's.
            let at = path(context)
            return at.isEmpty ? "the value is not valid for the type" : "invalid data at '\(at)'"
        @unknown default: return "decoding error"
        }
    }
}

/// Thrown by a column's decoder when the value asks for a keyed or unkeyed container: the column is then
/// read as JSON text.
private struct NeedsJSON: Error {}

/// Decodes rows of one statement. Kept by the result set across rows: the column of each coding key is
/// resolved at the first row and remembered by the position of the request (a synthesized
/// `init(from:)` asks for its keys in the same order every row), so later rows compare one short
/// string per property instead of searching the column names. No dictionary per row, no JSON for
/// scalars. Not Sendable: used on the result set's thread only.
final class RowDecoder: Decoder {
    let statement: Statement
    let dateFormatter: DateFormatter?
    // Unchecked exclusivity: one decoder is used by one result set on one thread, and none of these is
    // ever accessed re-entrantly (the dynamic checks cost more than the column reads on a scan).
    @exclusivity(unchecked) private(set) var handle: OpaquePointer
    @exclusivity(unchecked) private var typeName: Any.Type = Any.self
    /// Per request position: the key asked for and its column (-1: the query has no such column).
    @exclusivity(unchecked) private var plan: [(name: String, index: Int32)] = []
    @exclusivity(unchecked) private var cursor = 0
    /// The keyed container handed out at the last row, and its key type: a synthesized `init(from:)`
    /// asks for one per row, and `KeyedDecodingContainer` boxes it in a new class instance each time
    /// (an allocation per row); the box is reused instead. It holds this decoder: the result set
    /// breaks the cycle with `dropCachedContainer()` when it lets the decoder go.
    @exclusivity(unchecked) private var cachedContainer: AnyObject?
    @exclusivity(unchecked) private var cachedKeyType: ObjectIdentifier?

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(statement: Statement, handle: OpaquePointer, dateFormatter: DateFormatter?) {
        self.statement = statement
        self.handle = handle
        self.dateFormatter = dateFormatter
    }

    @inline(__always)
    func begin(handle: OpaquePointer, type: Any.Type) {
        self.handle = handle
        self.typeName = type
        cursor = 0
    }

    // MARK: Columns

    /// The column named `name` (a coding key's string value), or -1 when the query has none by that name.
    func lookup(_ name: String) -> Int32 {
        let position = cursor
        cursor &+= 1
        if position < plan.count {
            let entry = plan[position]
            if entry.name == name { return entry.index }
        }
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

    /// The column named `name`; throws when the query has none by that name.
    func column(_ name: String) throws -> Int32 {
        let index = lookup(name)
        guard index >= 0 else {
            throw failure("No column named '\(name)' in the result, needed to decode \(typeName)")
        }
        return index
    }

    @inline(__always)
    func isNull(_ index: Int32) -> Bool { ColumnAccess.type(handle, index) == SQLITE_NULL }

    // MARK: Errors

    func failure(_ message: String) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISMATCH, message: message, sql: statement.sql)
    }

    private func storageName(_ index: Int32) -> String {
        switch ColumnAccess.type(handle, index) {
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

    // MARK: Values

    @inline(__always)
    func integer<I: FixedWidthInteger>(_ type: I.Type, _ index: Int32) throws -> I {
        switch ColumnAccess.type(handle, index) {
        case SQLITE_INTEGER:
            guard let value = I(exactly: ColumnAccess.int64(handle, index)) else { throw outOfRange(index, I.self) }
            return value
        case SQLITE_FLOAT:
            let double = ColumnAccess.double(handle, index)
            guard double.rounded(.towardZero) == double else { throw mismatch(index, I.self) }
            guard let value = I(exactly: double) else { throw outOfRange(index, I.self) }
            return value
        default:
            throw mismatch(index, I.self)
        }
    }

    @inline(__always)
    func double(_ index: Int32, as type: Any.Type = Double.self) throws -> Double {
        switch ColumnAccess.type(handle, index) {
        case SQLITE_INTEGER, SQLITE_FLOAT: return ColumnAccess.double(handle, index)
        default: throw mismatch(index, type)
        }
    }

    @inline(__always)
    func bool(_ index: Int32) throws -> Bool {
        guard ColumnAccess.type(handle, index) == SQLITE_INTEGER else { throw mismatch(index, Bool.self) }
        return ColumnAccess.int64(handle, index) != 0
    }

    @inline(__always)
    func string(_ index: Int32, as type: Any.Type = String.self) throws -> String {
        guard ColumnAccess.type(handle, index) == SQLITE_TEXT, let text = ColumnAccess.string(handle, index) else {
            throw mismatch(index, type)
        }
        return text
    }

    @inline(__always)
    func data(_ index: Int32) throws -> Data {
        switch ColumnAccess.type(handle, index) {
        case SQLITE_BLOB, SQLITE_TEXT: return ColumnAccess.data(handle, index) ?? Data()
        default: throw mismatch(index, Data.self)
        }
    }

    func date(_ index: Int32) throws -> Date {
        switch ColumnAccess.type(handle, index) {
        case SQLITE_INTEGER, SQLITE_FLOAT:
            return Date(timeIntervalSince1970: ColumnAccess.double(handle, index))
        case SQLITE_TEXT:
            guard let dateFormatter else {
                throw failure(
                    "Cannot decode \(columnLabel(index)) as Date: it holds TEXT and the database has "
                        + "no date format (FMDatabase.setDateFormat(_:)); without one dates are numbers")
            }
            guard let text = ColumnAccess.string(handle, index), let date = dateFormatter.date(from: text) else {
                throw failure(
                    "Cannot decode \(columnLabel(index)) as Date: its text does not match the "
                        + "database's date format")
            }
            return date
        default:
            throw mismatch(index, Date.self)
        }
    }

    /// Any `Decodable` from one column: the known scalar types directly, then the type's own
    /// `init(from:)` over the column (enums by raw value, `Optional`), then JSON text.
    func value<T: Decodable>(_ type: T.Type, _ index: Int32) throws -> T {
        // T is exactly the type compared with, so the bit casts are identity conversions (no dynamic
        // cast on the hot path).
        if T.self == Data.self { return unsafeBitCast(try data(index), to: T.self) }
        if T.self == Date.self { return unsafeBitCast(try date(index), to: T.self) }
        if T.self == URL.self {
            guard let url = URL(string: try string(index, as: URL.self)) else {
                throw failure("Cannot decode \(columnLabel(index)) as URL: its text is not a URL")
            }
            return unsafeBitCast(url, to: T.self)
        }
        do {
            return try T(from: ColumnDecoder(row: self, index: index))
        } catch is NeedsJSON {
            return try json(T.self, index)
        } catch let error as FMDatabaseError {
            throw error
        } catch {
            throw failure("Cannot decode \(columnLabel(index)) as \(T.self): \(FMResultSet.describe(error))")
        }
    }

    private func json<T: Decodable>(_ type: T.Type, _ index: Int32) throws -> T {
        let kind = ColumnAccess.type(handle, index)
        guard kind == SQLITE_TEXT || kind == SQLITE_BLOB else { throw mismatch(index, T.self) }
        let bytes = ColumnAccess.data(handle, index) ?? Data()
        do {
            return try JSONDecoder().decode(T.self, from: bytes)
        } catch {
            throw failure(
                "Cannot decode \(columnLabel(index)) as \(T.self) from JSON text: "
                    + FMResultSet.describe(error))
        }
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if cachedKeyType == ObjectIdentifier(Key.self), let box = cachedContainer {
            // KeyedDecodingContainer<Key> is a struct around one class reference (its box): the cached
            // reference was made from a container of this very Key type, so this is that container again.
            return unsafeBitCast(box, to: KeyedDecodingContainer<Key>.self)
        }
        let container = KeyedDecodingContainer(RowContainer<Key>(row: self))
        if MemoryLayout<KeyedDecodingContainer<Key>>.size == MemoryLayout<AnyObject>.size {
            cachedContainer = unsafeBitCast(container, to: AnyObject.self)
            cachedKeyType = ObjectIdentifier(Key.self)
        }
        return container
    }

    /// Lets the cached container go (it holds this decoder): called when the result set drops the decoder.
    func dropCachedContainer() {
        cachedContainer = nil
        cachedKeyType = nil
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw failure(
            "Cannot decode \(typeName) from a row as a list: decode a type with properties named "
                + "after the columns")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard ColumnAccess.count(handle) > 0 else { throw failure("The row has no column to decode \(typeName) from") }
        return ColumnDecoder(row: self, index: 0)
    }
}

/// The properties of a row: one column per key.
private struct RowContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let row: RowDecoder

    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] {
        (0..<row.statement.columnCount).compactMap { row.statement.columnName($0).flatMap(Key.init(stringValue:)) }
    }

    /// The column of `key` (throws when the query has none).
    @inline(__always)
    private func column(_ key: Key) throws -> Int32 { try row.column(key.stringValue) }

    func contains(_ key: Key) -> Bool { row.lookup(key.stringValue) >= 0 }

    func decodeNil(forKey key: Key) throws -> Bool {
        let index = row.lookup(key.stringValue)
        return index < 0 || row.isNull(index)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try row.bool(column(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try row.string(column(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try row.double(column(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        Float(try row.double(column(key), as: Float.self))
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try row.integer(type, column(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try row.integer(type, column(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try row.integer(type, column(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try row.integer(type, column(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try row.integer(type, column(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try row.integer(type, column(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try row.integer(type, column(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try row.integer(type, column(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try row.integer(type, column(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try row.integer(type, column(key)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try row.value(type, column(key)) }

    /// The column of `key` unless it is NULL or missing (nil then).
    @inline(__always)
    private func present(_ key: Key) -> Int32? {
        let index = row.lookup(key.stringValue)
        return index < 0 || row.isNull(index) ? nil : index
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key).map(row.bool) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try present(key).map { try row.string($0) }
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try present(key).map { try row.double($0) }
    }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        try present(key).map { Float(try row.double($0, as: Float.self)) }
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
        try present(key).map { try row.integer(type, $0) }
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        // Not Optional.map: unspecialized here (T is the caller's), its closure costs a context per call.
        guard let index = present(key) else { return nil }
        return try row.value(type, index)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw row.failure(
            "Cannot decode column '\(key.stringValue)' as a nested container: decode a "
                + "Decodable property instead (it is read as JSON text)")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw row.failure(
            "Cannot decode column '\(key.stringValue)' as a nested list: decode an array "
                + "property instead (it is read as JSON text)")
    }

    func superDecoder() throws -> any Decoder { row }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        ColumnDecoder(row: row, index: try column(key))
    }
}

/// One column as a single value: what an enum's raw value, an `Optional` or a `UUID` decodes from.
/// A keyed or unkeyed container request means the column holds JSON text (`NeedsJSON`).
private struct ColumnDecoder: Decoder, SingleValueDecodingContainer {
    let row: RowDecoder
    let index: Int32

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw NeedsJSON() }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NeedsJSON() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { row.isNull(index) }
    func decode(_ type: Bool.Type) throws -> Bool { try row.bool(index) }
    func decode(_ type: String.Type) throws -> String { try row.string(index) }
    func decode(_ type: Double.Type) throws -> Double { try row.double(index) }
    func decode(_ type: Float.Type) throws -> Float { Float(try row.double(index, as: Float.self)) }
    func decode(_ type: Int.Type) throws -> Int { try row.integer(type, index) }
    func decode(_ type: Int8.Type) throws -> Int8 { try row.integer(type, index) }
    func decode(_ type: Int16.Type) throws -> Int16 { try row.integer(type, index) }
    func decode(_ type: Int32.Type) throws -> Int32 { try row.integer(type, index) }
    func decode(_ type: Int64.Type) throws -> Int64 { try row.integer(type, index) }
    func decode(_ type: UInt.Type) throws -> UInt { try row.integer(type, index) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try row.integer(type, index) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try row.integer(type, index) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try row.integer(type, index) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try row.integer(type, index) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try row.value(type, index) }
}
