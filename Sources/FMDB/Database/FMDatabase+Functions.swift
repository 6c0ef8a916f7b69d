import Foundation

extension FMDatabase {
    /// Adds an SQL function implemented by `block`. `arguments` is the argument count (-1: any).
    ///
    /// The FMDB 2.7 README's example, as written:
    /// ```swift
    /// db.makeFunctionNamed("RemoveDiacritics", arguments: 1) { context, argc, argv in
    ///     guard db.valueType(argv[0]) == .text || db.valueType(argv[0]) == .null else {
    ///         db.resultError("Expected string parameter", context: context)
    ///         return
    ///     }
    ///     if let string = db.valueString(argv[0])?.folding(options: .diacriticInsensitive, locale: nil) {
    ///         db.resultString(string, context: context)
    ///     } else {
    ///         db.resultNull(context: context)
    ///     }
    /// }
    /// ```
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/create_function.html>
    public func makeFunctionNamed(
        _ name: String,
        arguments: Int32,
        block:
            @escaping (
                _ context: UnsafeMutableRawPointer, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutableRawPointer>
            ) -> Void
    ) {
        recordingBool { try requireConnection().createFunction(name, arguments: arguments, block: block) }
    }

    /// The storage class of a custom function's argument (`sqlite3_value_type`).
    @discardableResult
    public func valueType(_ value: UnsafeMutableRawPointer) -> SqliteValueType {
        SqliteValueType(rawValue: FunctionValues.type(value)) ?? .null
    }

    /// A custom function's argument as Int32 (`sqlite3_value_int`).
    @discardableResult
    public func valueInt(_ value: UnsafeMutableRawPointer) -> Int32 { FunctionValues.int(value) }

    /// A custom function's argument as Int64 (`sqlite3_value_int64`).
    @discardableResult
    public func valueLong(_ value: UnsafeMutableRawPointer) -> Int64 { FunctionValues.int64(value) }

    /// A custom function's argument as Double (`sqlite3_value_double`).
    @discardableResult
    public func valueDouble(_ value: UnsafeMutableRawPointer) -> Double { FunctionValues.double(value) }

    /// The argument's bytes; nil for NULL.
    @discardableResult
    public func valueData(_ value: UnsafeMutableRawPointer) -> Data? {
        FunctionValues.data(value)
    }

    /// The argument as text; nil for NULL.
    @discardableResult
    public func valueString(_ value: UnsafeMutableRawPointer) -> String? {
        FunctionValues.string(value)
    }

    /// Sets a custom function's result to NULL.
    public func resultNull(context: UnsafeMutableRawPointer) { FunctionValues.resultNull(context) }

    /// Sets a custom function's result to an integer.
    public func resultInt(_ value: Int32, context: UnsafeMutableRawPointer) {
        FunctionValues.resultInt(value, context)
    }

    /// Sets a custom function's result to a 64-bit integer.
    public func resultLong(_ value: Int64, context: UnsafeMutableRawPointer) {
        FunctionValues.resultInt64(value, context)
    }

    /// Sets a custom function's result to a REAL.
    public func resultDouble(_ value: Double, context: UnsafeMutableRawPointer) {
        FunctionValues.resultDouble(value, context)
    }

    /// Sets a custom function's result to a BLOB (an empty one stays a zero-length BLOB).
    public func resultData(_ data: Data, context: UnsafeMutableRawPointer) {
        FunctionValues.resultData(data, context)
    }

    /// Sets a custom function's result to TEXT.
    public func resultString(_ value: String, context: UnsafeMutableRawPointer) {
        FunctionValues.resultString(value, context)
    }

    /// Makes the custom function fail with `error` as its message.
    public func resultError(_ error: String, context: UnsafeMutableRawPointer) {
        FunctionValues.resultError(error, context)
    }

    /// Makes the custom function fail with an SQLite result code.
    public func resultErrorCode(_ errorCode: Int32, context: UnsafeMutableRawPointer) {
        FunctionValues.resultErrorCode(errorCode, context)
    }

    /// Makes the custom function fail with SQLITE_NOMEM.
    public func resultErrorNoMemory(context: UnsafeMutableRawPointer) {
        FunctionValues.resultErrorNoMemory(context)
    }

    /// Makes the custom function fail with SQLITE_TOOBIG.
    public func resultErrorTooBig(context: UnsafeMutableRawPointer) {
        FunctionValues.resultErrorTooBig(context)
    }
}
