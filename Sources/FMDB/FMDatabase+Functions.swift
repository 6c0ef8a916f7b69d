import Foundation

/// The block behind one SQL function, kept alive by SQLite until the function is replaced or the
/// connection closes (`sqlite3_create_function_v2`'s destructor releases it).
private final class FunctionBox {
    typealias Block = (_ context: UnsafeMutableRawPointer, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutableRawPointer>) -> Void
    let block: Block
    init(_ block: @escaping Block) { self.block = block }
}

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
        block: @escaping (_ context: UnsafeMutableRawPointer, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutableRawPointer>) -> Void
    ) {
        recordingBool { try createFunction(name, arguments: arguments, block: block) }
    }

    private func createFunction(
        _ name: String,
        arguments: Int32,
        block: @escaping (_ context: UnsafeMutableRawPointer, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutableRawPointer>) -> Void
    ) throws {
        guard let db = connection?.handle else { throw FMDatabaseError.closed() }
        let box = Unmanaged.passRetained(FunctionBox(block))
        let rc = sqlite3_create_function_v2(
            db, name, arguments, SQLITE_UTF8, box.toOpaque(),
            { context, argc, argv in
                guard let context, let app = sqlite3_user_data(context) else { return }
                let box = Unmanaged<FunctionBox>.fromOpaque(app).takeUnretainedValue()
                let contextPointer = UnsafeMutableRawPointer(context)
                if let argv, argc > 0 {
                    // sqlite3_value** and void** have the same layout: one pointer per argument.
                    let values = UnsafeMutableRawPointer(argv).assumingMemoryBound(to: UnsafeMutableRawPointer.self)
                    box.block(contextPointer, argc, values)
                } else {
                    var none = contextPointer
                    withUnsafeMutablePointer(to: &none) { box.block(contextPointer, 0, $0) }
                }
            },
            nil, nil,
            { app in
                if let app { Unmanaged<FunctionBox>.fromOpaque(app).release() }
            }
        )
        if rc != SQLITE_OK {
            // On failure SQLite has already called the destructor (create_function_v2 docs).
            throw connection?.error(code: rc) ?? FMDatabaseError(code: rc)
        }
    }

    private func value(_ pointer: UnsafeMutableRawPointer) -> OpaquePointer { OpaquePointer(pointer) }

    /// The storage class of a custom function's argument (`sqlite3_value_type`).
    @discardableResult
    public func valueType(_ value: UnsafeMutableRawPointer) -> SqliteValueType {
        SqliteValueType(rawValue: sqlite3_value_type(self.value(value))) ?? .null
    }

    /// A custom function's argument as Int32 (`sqlite3_value_int`).
    @discardableResult
    public func valueInt(_ value: UnsafeMutableRawPointer) -> Int32 { sqlite3_value_int(self.value(value)) }

    /// A custom function's argument as Int64 (`sqlite3_value_int64`).
    @discardableResult
    public func valueLong(_ value: UnsafeMutableRawPointer) -> Int64 { sqlite3_value_int64(self.value(value)) }

    /// A custom function's argument as Double (`sqlite3_value_double`).
    @discardableResult
    public func valueDouble(_ value: UnsafeMutableRawPointer) -> Double { sqlite3_value_double(self.value(value)) }

    /// The argument's bytes; nil for NULL.
    @discardableResult
    public func valueData(_ value: UnsafeMutableRawPointer) -> Data? {
        let v = self.value(value)
        guard sqlite3_value_type(v) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_value_bytes(v))
        guard let bytes = sqlite3_value_blob(v) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    /// The argument as text; nil for NULL.
    @discardableResult
    public func valueString(_ value: UnsafeMutableRawPointer) -> String? {
        let v = self.value(value)
        guard sqlite3_value_type(v) != SQLITE_NULL, let text = sqlite3_value_text(v) else { return nil }
        let count = Int(sqlite3_value_bytes(v))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    private func context(_ pointer: UnsafeMutableRawPointer) -> OpaquePointer { OpaquePointer(pointer) }

    /// Sets a custom function's result to NULL.
    public func resultNull(context: UnsafeMutableRawPointer) { sqlite3_result_null(self.context(context)) }

    /// Sets a custom function's result to an integer.
    public func resultInt(_ value: Int32, context: UnsafeMutableRawPointer) {
        sqlite3_result_int(self.context(context), value)
    }

    /// Sets a custom function's result to a 64-bit integer.
    public func resultLong(_ value: Int64, context: UnsafeMutableRawPointer) {
        sqlite3_result_int64(self.context(context), value)
    }

    /// Sets a custom function's result to a REAL.
    public func resultDouble(_ value: Double, context: UnsafeMutableRawPointer) {
        sqlite3_result_double(self.context(context), value)
    }

    /// Sets a custom function's result to a BLOB (an empty one stays a zero-length BLOB).
    public func resultData(_ data: Data, context: UnsafeMutableRawPointer) {
        let ctx = self.context(context)
        data.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                fmdb_result_blob_transient(ctx, base, sqlite3_uint64(bytes.count))
            } else {
                sqlite3_result_zeroblob(ctx, 0)
            }
        }
    }

    /// Sets a custom function's result to TEXT.
    public func resultString(_ value: String, context: UnsafeMutableRawPointer) {
        let ctx = self.context(context)
        var value = value
        value.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                if let base = chars.baseAddress, chars.count > 0 {
                    fmdb_result_text_transient(ctx, base, sqlite3_uint64(chars.count))
                } else {
                    sqlite3_result_text(ctx, "", 0, nil)   // a static empty string: SQLITE_STATIC
                }
            }
        }
    }

    /// Makes the custom function fail with `error` as its message.
    public func resultError(_ error: String, context: UnsafeMutableRawPointer) {
        sqlite3_result_error(self.context(context), error, -1)
    }

    /// Makes the custom function fail with an SQLite result code.
    public func resultErrorCode(_ errorCode: Int32, context: UnsafeMutableRawPointer) {
        sqlite3_result_error_code(self.context(context), errorCode)
    }

    /// Makes the custom function fail with SQLITE_NOMEM.
    public func resultErrorNoMemory(context: UnsafeMutableRawPointer) {
        sqlite3_result_error_nomem(self.context(context))
    }

    /// Makes the custom function fail with SQLITE_TOOBIG.
    public func resultErrorTooBig(context: UnsafeMutableRawPointer) {
        sqlite3_result_error_toobig(self.context(context))
    }
}
