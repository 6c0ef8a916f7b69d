import Foundation

extension FMDatabase {
    /// Runs a query and decodes every row into `type` (see ``FMResultSet/decode(_:)`` for the column
    /// conversions).
    ///
    /// ```swift
    /// struct Person: Codable { var id: Int64; var name: String; var email: String? }
    /// let adults = try db.fetchAll(Person.self, "SELECT * FROM people WHERE age >= ?", values: [18])
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/column_blob.html>
    ///
    /// - Parameters:
    ///   - type: The row type.
    ///   - sql: One SQL statement that returns rows.
    ///   - values: The values of its `?` parameters, bound as ``executeQuery(_:values:)`` binds them.
    /// - Returns: The decoded rows, in the query's order.
    /// - Throws: The query's error, or a decoding error (code 20, `SQLITE_MISMATCH`, naming the column
    ///   and the type). The error is also kept for ``lastError()``.
    public func fetchAll<T: Decodable>(_ type: T.Type, _ sql: String, values: [Any] = []) throws -> [T] {
        try recording {
            let rs = try query(sql) { try $0.bind(array: values, dateFormatter: dateFormatter) }
            defer { rs.close() }
            var rows: [T] = []
            while try rs.nextWithError() {
                rows.append(try rs.decode(T.self))
            }
            return rows
        }
    }

    /// Runs a query and decodes its first row into `type`; nil when it returns no row.
    ///
    /// ```swift
    /// let count = try db.fetchOne(Int.self, "SELECT count(*) FROM people")
    /// let person = try db.fetchOne(Person.self, "SELECT * FROM people WHERE id = ?", values: [1])
    /// ```
    ///
    /// - Parameters:
    ///   - type: The row type; a type that decodes a single value (`Int`, `String`) reads the first column.
    ///   - sql: One SQL statement that returns rows.
    ///   - values: The values of its `?` parameters.
    /// - Returns: The first row decoded, or nil.
    /// - Throws: As ``fetchAll(_:_:values:)``.
    public func fetchOne<T: Decodable>(_ type: T.Type, _ sql: String, values: [Any] = []) throws -> T? {
        try recording {
            let rs = try query(sql) { try $0.bind(array: values, dateFormatter: dateFormatter) }
            defer { rs.close() }
            guard try rs.nextWithError() else { return nil }
            return try rs.decode(T.self)
        }
    }

    /// Runs one statement with the properties of an `Encodable` value bound as named parameters: the
    /// property `name` binds `:name` (or `@name`, `$name`). Properties the SQL does not name are
    /// ignored; a parameter no property fills is an error.
    ///
    /// Values bind as ``executeUpdate(_:values:)`` binds them, and so that ``FMResultSet/decode(_:)``
    /// reads them back: a `nil` optional binds NULL; `Date` binds seconds since 1970 (or text in the
    /// database's date format); `Data` a BLOB; `Bool` 0 or 1; `URL` its text; an enum its raw value;
    /// any other value (a nested struct, an array) its JSON text.
    ///
    /// ```swift
    /// struct Person: Codable { var id: Int64; var name: String; var email: String? }
    /// try db.executeUpdate("INSERT INTO people (id, name, email) VALUES (:id, :name, :email)",
    ///                      encoding: Person(id: 1, name: "Ada", email: nil))
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/bind_parameter_index.html>
    ///
    /// - Parameters:
    ///   - sql: One SQL statement with named parameters.
    ///   - value: The value whose properties fill them.
    /// - Throws: The statement's error; code 20 (`SQLITE_MISMATCH`) when a value cannot be bound (an
    ///   unsigned integer above `Int64.max`, a value that does not encode as keyed properties); code 25
    ///   (`SQLITE_RANGE`) when parameters and properties do not match.
    public func executeUpdate<T: Encodable>(_ sql: String, encoding value: T) throws {
        try recording {
            let parameters = try ParameterEncoder.parameters(of: value)
            try update(sql) { try $0.bind(named: parameters, dateFormatter: dateFormatter) }
        }
    }

    /// Runs a query with the properties of an `Encodable` value bound as named parameters (`:name`,
    /// `@name`, `$name`), as ``executeUpdate(_:encoding:)`` binds them: the way to filter a SELECT by a
    /// value's fields.
    ///
    /// ```swift
    /// struct AgeRange: Encodable { var low: Int; var high: Int }
    /// let rs = try db.executeQuery("SELECT * FROM people WHERE age BETWEEN :low AND :high",
    ///                              encoding: AgeRange(low: 18, high: 65))
    /// while rs.next() { let person = try rs.decode(Person.self) }
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/bind_parameter_index.html>
    ///
    /// - Parameters:
    ///   - sql: One SQL statement with named parameters.
    ///   - value: The value whose properties fill them; properties the SQL does not name are ignored.
    /// - Returns: The result set, before its first row, as ``executeQuery(_:values:)`` returns it.
    /// - Throws: As ``executeUpdate(_:encoding:)``, and code 1 (`SQLITE_ERROR`) for SQL that does not
    ///   compile. The error is also kept for ``lastError()``.
    public func executeQuery<T: Encodable>(_ sql: String, encoding value: T) throws -> FMResultSet {
        try recording {
            let parameters = try ParameterEncoder.parameters(of: value)
            return try query(sql) { try $0.bind(named: parameters, dateFormatter: dateFormatter) }
        }
    }
}

/// Turns an `Encodable` value's properties into the name and value pairs `Statement.bind(named:)` takes.
/// Scalars are stored as the values the binding rules know; anything else as JSON text.
private final class ParameterEncoder: Encoder {
    /// The properties in encoding order, each name once (a property encoded again replaces its value).
    var parameters = Parameters()
    var failure: FMDatabaseError?

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    static func parameters(of value: some Encodable) throws -> Zip2Sequence<[String], [Any]> {
        let encoder = ParameterEncoder()
        try value.encode(to: encoder)
        if let failure = encoder.failure { throw failure }
        return encoder.parameters.pairs
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(ParameterContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        fail("A value encoded as a list cannot fill named parameters: encode a type with properties")
        return JSONProbe().unkeyedContainer()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        fail("A single value cannot fill named parameters: encode a type with properties")
        return JSONProbe().singleValueContainer()
    }

    func fail(_ message: String) {
        if failure == nil { failure = FMDatabaseError(code: SQLITE_MISMATCH, message: message) }
    }

    /// The value to bind for one property.
    func bindable<T: Encodable>(_ value: T, name: String) throws -> Any {
        if let scalar = try scalar(value, name: name) { return scalar }
        // An enum's raw value, an Optional, a UUID: a single value. A keyed or unkeyed container: JSON.
        let probe = JSONProbe()
        try value.encode(to: probe)
        if !probe.needsJSON {
            guard let single = probe.single else { return NSNull() }
            return try scalar(single, name: name) ?? NSNull()
        }
        do {
            // Sorted keys: the same value is always stored as the same text (comparable in SQL).
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw FMDatabaseError(
                code: SQLITE_MISMATCH,
                message: "Cannot bind property '\(name)' as JSON text: \(type(of: error))")
        }
    }

    /// A value the binding rules take as it is; nil for anything else.
    private func scalar(_ value: Any, name: String) throws -> Any? {
        switch value {
        case let value as NSNull: return value
        case let value as Data: return value
        case let value as Date: return value
        case let value as URL: return value.absoluteString
        case let value as String: return value
        case let value as Bool: return value
        case let value as Double: return value
        case let value as Float: return Double(value)
        case let value as any FixedWidthInteger: return try integer(value, name: name)
        default: return nil
        }
    }

    func integer(_ value: some FixedWidthInteger, name: String) throws -> Any {
        guard let int64 = Int64(exactly: value) else {
            throw FMDatabaseError(
                code: SQLITE_MISMATCH,
                message: "Cannot bind property '\(name)': its value does not fit in a 64-bit integer")
        }
        return int64
    }
}

/// Name and value pairs in order; setting a name again replaces its value (a short linear search: a value
/// has a few properties, and names are usually unique, so the search finds nothing).
private struct Parameters {
    private var names: [String] = []
    private var values: [Any] = []

    var pairs: Zip2Sequence<[String], [Any]> { zip(names, values) }

    mutating func set(_ name: String, _ value: Any) {
        if let position = names.firstIndex(of: name) {
            values[position] = value
        } else {
            names.append(name)
            values.append(value)
        }
    }
}

private struct ParameterContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: ParameterEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { encoder.parameters.set(key.stringValue, NSNull()) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        // The types the binding rules take as they are, found by comparing types: the casts `bindable`
        // tries in turn cost more than the rest of the row (callgrind).
        if T.self == Data.self || T.self == Date.self || T.self == String.self {
            encoder.parameters.set(key.stringValue, value)
            return
        }
        encoder.parameters.set(key.stringValue, try encoder.bindable(value, name: key.stringValue))
    }

    // Scalars stored as the values the binding rules know, without a dynamic cast.
    mutating func encode(_ value: Bool, forKey key: Key) throws { encoder.parameters.set(key.stringValue, value) }
    mutating func encode(_ value: String, forKey key: Key) throws { encoder.parameters.set(key.stringValue, value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { encoder.parameters.set(key.stringValue, value) }
    mutating func encode(_ value: Float, forKey key: Key) throws {
        encoder.parameters.set(key.stringValue, Double(value))
    }
    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, key) }

    private mutating func integer<I: FixedWidthInteger>(_ value: I, _ key: Key) throws {
        encoder.parameters.set(key.stringValue, try encoder.integer(value, name: key.stringValue))
    }

    // A nil optional binds NULL (the default implementations would leave the parameter unbound).
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try put(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try put(value, key) }

    private mutating func put<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        encoder.fail(
            "Property '\(key.stringValue)' uses a nested container: encode a Codable property instead "
                + "(it is bound as JSON text)")
        return JSONProbe().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoder.fail(
            "Property '\(key.stringValue)' uses a nested list: encode an array property instead "
                + "(it is bound as JSON text)")
        return JSONProbe().unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { encoder }
    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder }
}

/// Encodes one property to find out its shape: a single value (kept in `single`) or a keyed or
/// unkeyed container (`needsJSON`: the property is bound as JSON text). Ignores what a container
/// receives.
private final class JSONProbe: Encoder, SingleValueEncodingContainer {
    var single: Any?
    var needsJSON = false
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        needsJSON = true
        return KeyedEncodingContainer(IgnoringContainer<Key>(probe: self))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        needsJSON = true
        return IgnoringContainer<PositionKey>(probe: self)
    }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { single = NSNull() }
    func encode(_ value: Bool) throws { single = value }
    func encode(_ value: String) throws { single = value }
    func encode(_ value: Double) throws { single = value }
    func encode(_ value: Float) throws { single = value }
    func encode(_ value: Int) throws { single = value }
    func encode(_ value: Int8) throws { single = value }
    func encode(_ value: Int16) throws { single = value }
    func encode(_ value: Int32) throws { single = value }
    func encode(_ value: Int64) throws { single = value }
    func encode(_ value: UInt) throws { single = value }
    func encode(_ value: UInt8) throws { single = value }
    func encode(_ value: UInt16) throws { single = value }
    func encode(_ value: UInt32) throws { single = value }
    func encode(_ value: UInt64) throws { single = value }
    func encode<T: Encodable>(_ value: T) throws {
        switch value {
        case is Data, is Date, is URL: single = value
        default:
            // A wrapped value (an enum whose raw value is a struct…): find its own shape.
            let inner = JSONProbe()
            try value.encode(to: inner)
            if inner.needsJSON { needsJSON = true } else { single = inner.single }
        }
    }
}

private struct PositionKey: CodingKey {
    var stringValue: String { "" }
    var intValue: Int? { nil }
    init?(stringValue: String) {}
    init?(intValue: Int) {}
    init() {}
}

/// Accepts and drops everything (the probe has already decided on JSON).
private struct IgnoringContainer<Key: CodingKey>: KeyedEncodingContainerProtocol, UnkeyedEncodingContainer {
    let probe: JSONProbe
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(IgnoringContainer<NestedKey>(probe: probe))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { probe }
    mutating func superEncoder(forKey key: Key) -> any Encoder { probe }

    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(IgnoringContainer<NestedKey>(probe: probe))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
}
