import Foundation

/// One column as a single value: what an enum's raw value, an `Optional` or a `UUID` decodes from.
/// A keyed or unkeyed container request means the column holds JSON text (`NeedsJSON`).
struct ColumnDecoder: Decoder, SingleValueDecodingContainer {
    /// Thrown when the value asks for a keyed or unkeyed container: the column is then read as JSON text.
    struct NeedsJSON: Error {}

    let row: RowDecoder
    let index: Int32

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw NeedsJSON() }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NeedsJSON() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// The column's value; throws when used after its `init(from:)` returned.
    private func value() throws -> ColumnValue {
        guard row.isDecoding else { throw row.escaped() }
        return row.read(index)
    }

    func decodeNil() -> Bool { ((try? value().type) ?? SQLITE_NULL) == SQLITE_NULL }
    func decode(_ type: Bool.Type) throws -> Bool { try row.bool(value(), index) }
    func decode(_ type: String.Type) throws -> String { try row.string(value(), index) }
    func decode(_ type: Double.Type) throws -> Double { try row.double(value(), index) }
    func decode(_ type: Float.Type) throws -> Float { Float(try row.double(value(), index, as: Float.self)) }
    func decode(_ type: Int.Type) throws -> Int { try row.integer(type, value(), index) }
    func decode(_ type: Int8.Type) throws -> Int8 { try row.integer(type, value(), index) }
    func decode(_ type: Int16.Type) throws -> Int16 { try row.integer(type, value(), index) }
    func decode(_ type: Int32.Type) throws -> Int32 { try row.integer(type, value(), index) }
    func decode(_ type: Int64.Type) throws -> Int64 { try row.integer(type, value(), index) }
    func decode(_ type: UInt.Type) throws -> UInt { try row.integer(type, value(), index) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try row.integer(type, value(), index) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try row.integer(type, value(), index) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try row.integer(type, value(), index) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try row.integer(type, value(), index) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try row.value(type, value(), index) }
}
