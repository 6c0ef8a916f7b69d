import CSQLCipher
import Foundation

/// The block behind one SQL function, kept alive by SQLite until the function is replaced or the
/// connection closes (`sqlite3_create_function_v2`'s destructor releases it).
private final class FunctionBox {
    typealias Block = (
        _ context: UnsafeMutableRawPointer, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutableRawPointer>
    ) -> Void
    let block: Block
    init(_ block: @escaping Block) { self.block = block }
}

extension Connection {
    /// Adds the SQL function `name` (`arguments`: the argument count, -1 for any) implemented by `block`,
    /// which gets the opaque `sqlite3_context*` and `sqlite3_value**` that `FunctionValues` reads and writes.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/create_function.html>
    func createFunction(
        _ name: String,
        arguments: Int32,
        block:
            @escaping (
                _ context: UnsafeMutableRawPointer, _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutableRawPointer>
            ) -> Void
    ) throws {
        guard let db = handle else { throw FMDatabaseError.closed() }
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
            throw error(code: rc)
        }
    }
}

/// A custom SQL function's arguments (`sqlite3_value*`) and result (`sqlite3_context*`), as the opaque
/// pointers FMDB's API hands to the function's block.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/value_blob.html>,
/// <https://www.sqlite.org/c3ref/result_blob.html>
enum FunctionValues {
    private static func value(_ pointer: UnsafeMutableRawPointer) -> OpaquePointer { OpaquePointer(pointer) }
    private static func context(_ pointer: UnsafeMutableRawPointer) -> OpaquePointer { OpaquePointer(pointer) }

    static func type(_ v: UnsafeMutableRawPointer) -> Int32 { sqlite3_value_type(value(v)) }
    static func int(_ v: UnsafeMutableRawPointer) -> Int32 { sqlite3_value_int(value(v)) }
    static func int64(_ v: UnsafeMutableRawPointer) -> Int64 { sqlite3_value_int64(value(v)) }
    static func double(_ v: UnsafeMutableRawPointer) -> Double { sqlite3_value_double(value(v)) }

    /// The argument's bytes; nil for NULL.
    static func data(_ pointer: UnsafeMutableRawPointer) -> Data? {
        let v = value(pointer)
        guard sqlite3_value_type(v) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_value_bytes(v))
        guard let bytes = sqlite3_value_blob(v) else { return Data() }
        return Data(bytes: bytes, count: count)
    }

    /// The argument as text; nil for NULL.
    static func string(_ pointer: UnsafeMutableRawPointer) -> String? {
        let v = value(pointer)
        guard sqlite3_value_type(v) != SQLITE_NULL, let text = sqlite3_value_text(v) else { return nil }
        let count = Int(sqlite3_value_bytes(v))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    static func resultNull(_ c: UnsafeMutableRawPointer) { sqlite3_result_null(context(c)) }
    static func resultInt(_ value: Int32, _ c: UnsafeMutableRawPointer) { sqlite3_result_int(context(c), value) }
    static func resultInt64(_ value: Int64, _ c: UnsafeMutableRawPointer) { sqlite3_result_int64(context(c), value) }
    static func resultDouble(_ value: Double, _ c: UnsafeMutableRawPointer) { sqlite3_result_double(context(c), value) }

    /// A BLOB result (an empty one stays a zero-length BLOB).
    static func resultData(_ data: Data, _ c: UnsafeMutableRawPointer) {
        let ctx = context(c)
        data.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                fmdb_result_blob_transient(ctx, base, sqlite3_uint64(bytes.count))
            } else {
                sqlite3_result_zeroblob(ctx, 0)
            }
        }
    }

    /// A TEXT result.
    static func resultString(_ value: String, _ c: UnsafeMutableRawPointer) {
        let ctx = context(c)
        var value = value
        value.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                if let base = chars.baseAddress, chars.count > 0 {
                    fmdb_result_text_transient(ctx, base, sqlite3_uint64(chars.count))
                } else {
                    sqlite3_result_text(ctx, "", 0, nil)  // a static empty string: SQLITE_STATIC
                }
            }
        }
    }

    static func resultError(_ message: String, _ c: UnsafeMutableRawPointer) {
        sqlite3_result_error(context(c), message, -1)
    }
    static func resultErrorCode(_ code: Int32, _ c: UnsafeMutableRawPointer) {
        sqlite3_result_error_code(context(c), code)
    }
    static func resultErrorNoMemory(_ c: UnsafeMutableRawPointer) { sqlite3_result_error_nomem(context(c)) }
    static func resultErrorTooBig(_ c: UnsafeMutableRawPointer) { sqlite3_result_error_toobig(context(c)) }
}
