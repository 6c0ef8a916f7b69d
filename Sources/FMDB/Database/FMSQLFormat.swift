/// SQL written as a string literal with interpolations, where every interpolated value becomes a
/// bound `?` parameter: Swift's reading of FMDB's `executeUpdateWithFormat:`, minus its injection risk.
///
/// ```swift
/// let name: String? = nil
/// db.executeUpdate(withFormat: "INSERT INTO t VALUES (\(42), \(name))")   // binds 42 and NULL
/// ```
public struct FMSQLFormat: ExpressibleByStringInterpolation {
    /// The SQL, with a `?` where each value was interpolated.
    public let sql: String
    /// The interpolated values, in order (nil for NULL).
    public let arguments: [Any?]

    /// SQL with no interpolated values.
    public init(stringLiteral value: String) {
        sql = value
        arguments = []
    }

    /// SQL with every interpolated value as a bound parameter.
    public init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        arguments = stringInterpolation.arguments
    }

    /// Builds the SQL and its arguments.
    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var arguments: [Any?] = []

        /// Starts an interpolation.
        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount)
            arguments.reserveCapacity(interpolationCount)
        }

        /// Appends SQL text.
        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// Appends a `?` and binds `value` to it.
        public mutating func appendInterpolation(_ value: Any?) {
            sql += "?"
            arguments.append(value)
        }
    }
}
