import Foundation

/// The properties of a row: one column per key, found by the row decoder (`RowDecoder.column(named:)`).
/// The usual case of each property (the column is there and holds the type) is read here; conversions
/// and errors are the decoder's.
struct RowKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let row: RowDecoder

    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] {
        (0..<row.statement.columnCount).compactMap { row.statement.columnName($0).flatMap(Key.init(stringValue:)) }
    }

    /// The column of `key`, -1 when the query has none; throws when used after its `init(from:)`.
    private func lookup(_ key: Key) throws -> Int32 { try row.column(named: key.stringValue) }

    /// The column of `key` (throws when the query has none).
    private func column(_ key: Key) throws -> Int32 {
        let index = try lookup(key)
        guard index >= 0 else { throw row.missingColumn(key.stringValue) }
        return index
    }

    /// The column of `key`, its value and the value's type unless it is NULL or missing (nil then).
    private func present(_ key: Key) throws -> (ColumnValue, Int32, kind: Int32)? {
        let index = try lookup(key)
        guard index >= 0 else { return nil }
        let value = row.read(index)
        let kind = value.type
        return kind == SQLITE_NULL ? nil : (value, index, kind)
    }

    func contains(_ key: Key) -> Bool { ((try? lookup(key)) ?? -1) >= 0 }

    func decodeNil(forKey key: Key) throws -> Bool {
        let index = try lookup(key)
        return index < 0 || row.read(index).type == SQLITE_NULL
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let index = try column(key)
        return try row.bool(row.read(index), index)
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let index = try column(key)
        return try row.string(row.read(index), index)
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let index = try column(key)
        return try row.double(row.read(index), index)
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        let index = try column(key)
        return Float(try row.double(row.read(index), index, as: Float.self))
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        let index = try column(key)
        return try row.int(row.read(index), index)
    }

    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        let index = try column(key)
        return try row.int64(row.read(index), index)
    }

    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let index = try column(key)
        return try row.value(type, row.read(index), index)
    }

    private func integer<I: FixedWidthInteger>(_ key: Key) throws -> I {
        let index = try column(key)
        return try row.integer(I.self, row.read(index), index)
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.bool(value, index)
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.string(value, index)
    }

    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.double(value, index)
    }

    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        guard let (value, index, _) = try present(key) else { return nil }
        return Float(try row.double(value, index, as: Float.self))
    }

    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.int(value, index)
    }

    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.int64(value, index)
    }

    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try integerIfPresent(key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try integerIfPresent(key) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.value(type, value, index)
    }

    private func integerIfPresent<I: FixedWidthInteger>(_ key: Key) throws -> I? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.integer(I.self, value, index)
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
