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
    /// Each key's column is resolved at the first row that asks for it and kept until the result set is
    /// bound again or closed. Decoding row after row into a struct of five properties (two `Int64`, a
    /// `Double`, a `String?`, a `Data?`) runs about 1.9 times the instructions of reading the same five
    /// columns by index with the typed getters, and takes about 2.1 times their time (BENCHMARKS.md,
    /// "Codable rows": the W2 scan through Codable against the same scan by index).
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
        guard let handle = currentRowHandle else {
            throw FMDatabaseError.misuse(
                "There is no current row to decode \(T.self) from: call next() first.", sql: query)
        }
        let decoder: RowDecoder
        if let existing = rowDecoder, existing.handle == handle {
            decoder = existing
        } else {
            decoder = try makeRowDecoder(handle)
        }
        decoder.begin(type: T.self)
        defer { decoder.end() }
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

    /// The decoder for this result set's rows, made at the first row decoded.
    private func makeRowDecoder(_ handle: OpaquePointer) throws -> RowDecoder {
        guard let statement = currentStatement else {
            throw FMDatabaseError.misuse("The result set is closed.", sql: query)
        }
        let decoder = RowDecoder(statement: statement, handle: handle, dateFormatter: parentDB?.dateFormatter)
        rowDecoder?.retire()
        rowDecoder = decoder
        return decoder
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
