import CSQLCipher
import Foundation

/// An optional of any depth, seen through `Any`: lets the binder tell `Optional<T>.none` (NULL)
/// from a value.
protocol OptionalValue {
    var wrappedAny: Any? { get }
}

extension Optional: OptionalValue {
    var wrappedAny: Any? {
        switch self {
        case .none: return nil
        case .some(let value): return value
        }
    }
}

/// A zero-length string for binding an empty TEXT (a nil pointer would bind NULL).
private let emptyCString: StaticString = ""

extension Statement {
    /// Binds NULL.
    @inline(__always)
    func bindNull(at index: Int32) -> Int32 {
        guard let stmt = handle else { return SQLITE_MISUSE }
        return sqlite3_bind_null(stmt, index)
    }

    @inline(__always)
    func bind(_ value: Int64, at index: Int32) -> Int32 {
        guard let stmt = handle else { return SQLITE_MISUSE }
        return sqlite3_bind_int64(stmt, index, value)
    }

    @inline(__always)
    func bind(_ value: Double, at index: Int32) -> Int32 {
        guard let stmt = handle else { return SQLITE_MISUSE }
        return sqlite3_bind_double(stmt, index, value)
    }

    /// Binds TEXT with its full UTF-8 length, so embedded NULs are kept and an empty string stays
    /// an empty TEXT. Strings past SQLite's length limit fail with SQLITE_TOOBIG.
    @inline(__always)
    func bind(_ value: String, at index: Int32) -> Int32 {
        guard let stmt = handle else { return SQLITE_MISUSE }
        var value = value
        return value.withUTF8 { buffer in
            if let base = buffer.baseAddress, buffer.count > 0 {
                return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    fmdb_bind_text_transient(stmt, index, $0, sqlite3_uint64(buffer.count))
                }
            }
            return emptyCString.withUTF8Buffer { empty in
                empty.baseAddress.map {
                    UnsafeRawPointer($0).withMemoryRebound(to: CChar.self, capacity: 1) {
                        fmdb_bind_text_transient(stmt, index, $0, 0)
                    }
                } ?? SQLITE_MISUSE
            }
        }
    }

    /// Binds a BLOB; an empty one stays a zero-length BLOB (not NULL).
    @inline(__always)
    func bind(bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        guard let stmt = handle else { return SQLITE_MISUSE }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            return sqlite3_bind_zeroblob(stmt, index, 0)
        }
        return fmdb_bind_blob_transient(stmt, index, base, sqlite3_uint64(bytes.count))
    }

    /// Binds `bytes` as a BLOB that SQLite reads in place (`SQLITE_STATIC`): the caller keeps them alive,
    /// unchanged, until the statement's bindings are cleared. For key bytes, which must not be copied
    /// into memory that is freed without being wiped.
    func bindStatic(bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        // An empty buffer would bind NULL, which means something else than no bytes (ATTACH ... KEY NULL
        // takes the main database's key): refused.
        guard let stmt = handle, let base = bytes.baseAddress, bytes.count > 0 else { return SQLITE_MISUSE }
        return sqlite3_bind_blob64(stmt, index, base, sqlite3_uint64(bytes.count), nil)
    }

    @inline(__always)
    func bind(_ value: Data, at index: Int32) -> Int32 {
        value.withUnsafeBytes { bind(bytes: $0, at: index) }
    }

    /// Binds one value of any type by the rules of <doc:BindingAndReadingValues>: nil/NSNull → NULL,
    /// Data/[UInt8] → BLOB, Date → REAL seconds since 1970 (or formatted TEXT), Bool → 0/1, integers → INTEGER
    /// (UInt64 past Int64.max: the bit pattern), Float/Double → REAL, String → TEXT, anything else
    /// → its `description` as TEXT.
    func bind(any value: Any?, at index: Int32, dateFormatter: DateFormatter?) -> Int32 {
        guard let value else { return bindNull(at: index) }
        return bind(anyValue: value, at: index, dateFormatter: dateFormatter)
    }

    /// The common types are recognized inside `bind(opened:)`, which sees the value with its dynamic
    /// type opened: a type comparison (one pointer compare) then a reinterpretation of a value already
    /// known to have that type, with no runtime cast at all (`as?` from `Any` costs about 250
    /// instructions even when it succeeds, and far more when it fails on Linux). Other types go down
    /// the chain of conditional casts.
    func bind(anyValue value: Any, at index: Int32, dateFormatter: DateFormatter?) -> Int32 {
        bind(opened: value, at: index, dateFormatter: dateFormatter)
    }

    private func bind<Value>(opened value: Value, at index: Int32, dateFormatter: DateFormatter?) -> Int32 {
        // Each `unsafeBitCast` below is between `Value` and the very type it was just compared equal to.
        // Kept, measured: `value as! T` instead (a runtime cast each) costs ~130 instructions a bound value
        // (W1 `compat`, callgrind on SQLCipher 3.4.1: 220.0 M -> 233.5 M, +7% over start-up).
        if Value.self == Int.self { return bind(Int64(unsafeBitCast(value, to: Int.self)), at: index) }
        if Value.self == String.self { return bind(unsafeBitCast(value, to: String.self), at: index) }
        if Value.self == Double.self { return bind(unsafeBitCast(value, to: Double.self), at: index) }
        if Value.self == Data.self { return bind(unsafeBitCast(value, to: Data.self), at: index) }
        if Value.self == Int64.self { return bind(unsafeBitCast(value, to: Int64.self), at: index) }
        if Value.self == Bool.self { return bind(Int64(unsafeBitCast(value, to: Bool.self) ? 1 : 0), at: index) }
        return bindSlowly(value, at: index, dateFormatter: dateFormatter)
    }

    private func bindSlowly(_ value: Any, at index: Int32, dateFormatter: DateFormatter?) -> Int32 {
        switch value {
        case let v as String: return bind(v, at: index)
        case let v as Int: return bind(Int64(v), at: index)
        case let v as Int64: return bind(v, at: index)
        case let v as Double: return bind(v, at: index)
        case let v as Data: return bind(v, at: index)
        case is NSNull: return bindNull(at: index)
        case let v as Bool: return bind(Int64(v ? 1 : 0), at: index)
        case let v as Date:
            if let dateFormatter { return bind(dateFormatter.string(from: v), at: index) }
            return bind(v.timeIntervalSince1970, at: index)
        case let v as [UInt8]: return v.withUnsafeBytes { bind(bytes: $0, at: index) }
        case let v as Int32: return bind(Int64(v), at: index)
        case let v as Int16: return bind(Int64(v), at: index)
        case let v as Int8: return bind(Int64(v), at: index)
        case let v as UInt: return bind(Int64(bitPattern: UInt64(v)), at: index)
        case let v as UInt64: return bind(Int64(bitPattern: v), at: index)
        case let v as UInt32: return bind(Int64(v), at: index)
        case let v as UInt16: return bind(Int64(v), at: index)
        case let v as UInt8: return bind(Int64(v), at: index)
        case let v as Float: return bind(Double(v), at: index)
        case let v as NSNumber: return bind(number: v, at: index)
        case let v as OptionalValue:
            return bind(any: v.wrappedAny, at: index, dateFormatter: dateFormatter)
        case let v as CustomStringConvertible: return bind(v.description, at: index)
        default: return bind(String(describing: value), at: index)
        }
    }

    /// NSNumber by its stored type, as FMDB reads `objCType`.
    private func bind(number: NSNumber, at index: Int32) -> Int32 {
        switch number.objCType.pointee {
        case CChar(UInt8(ascii: "B")):
            return bind(Int64(number.boolValue ? 1 : 0), at: index)
        case CChar(UInt8(ascii: "c")):
            // char, and BOOL on Apple platforms (signed char): FMDB binds charValue.
            return bind(Int64(number.int8Value), at: index)
        case CChar(UInt8(ascii: "C")):
            return bind(Int64(number.uint8Value), at: index)
        case CChar(UInt8(ascii: "f")), CChar(UInt8(ascii: "d")):
            return bind(number.doubleValue, at: index)
        case CChar(UInt8(ascii: "Q")), CChar(UInt8(ascii: "L")):
            return bind(Int64(bitPattern: number.uint64Value), at: index)
        default:
            return bind(number.int64Value, at: index)
        }
    }

    /// Binds an array of values to parameters 1...n. The count must match the statement's.
    func bind(array values: [Any], dateFormatter: DateFormatter?) throws {
        try checkCount(values.count)
        var index: Int32 = 1
        for value in values {
            let rc = bind(anyValue: value, at: index, dateFormatter: dateFormatter)
            if rc != SQLITE_OK { throw connection.error(code: rc, sql: sql) }
            index += 1
        }
    }

    /// The same for optional values (FMDB's variadic `Any?...` arguments): nil binds NULL.
    func bind(array values: [Any?], dateFormatter: DateFormatter?) throws {
        try checkCount(values.count)
        var index: Int32 = 1
        for value in values {
            let rc = bind(any: value, at: index, dateFormatter: dateFormatter)
            if rc != SQLITE_OK { throw connection.error(code: rc, sql: sql) }
            index += 1
        }
    }

    private func checkCount(_ count: Int) throws {
        let expected = parameterCount
        guard count == Int(expected) else {
            throw FMDatabaseError.bindCount(expected: expected, got: count, sql: sql)
        }
    }

    private static let parameterPrefixes = [":", "@", "$"]

    /// Binds named parameters: a key `name` binds `:name` (or `@name`, `$name`). Every parameter of
    /// the statement must be given a value; a name with a NUL byte is refused (SQLITE_MISUSE).
    func bind(dictionary: [AnyHashable: Any], dateFormatter: DateFormatter?) throws {
        try bind(
            named: dictionary.lazy.map { ((($0.key.base as? String) ?? String(describing: $0.key.base)), $0.value) },
            dateFormatter: dateFormatter)
    }

    /// The same for name and value pairs, each name once (an `Encodable` value's properties): no
    /// dictionary of `AnyHashable` keys to build and hash.
    func bind(named pairs: some Sequence<(String, Any)>, dateFormatter: DateFormatter?) throws {
        let expected = parameterCount
        var bound: Int32 = 0
        for (name, value) in pairs {
            // SQLite reads a parameter name only up to a NUL byte: "a\0b" would bind :a.
            guard !name.utf8.contains(0) else {
                throw FMDatabaseError.misuse(
                    "A parameter name holds a NUL byte: SQLite would read it only up to there and bind another "
                        + "parameter.", sql: sql)
            }
            var index: Int32 = 0
            for prefix in Self.parameterPrefixes where index == 0 {
                index = parameterIndex(prefix + name)
            }
            guard index > 0 else { continue }
            let rc = bind(any: value, at: index, dateFormatter: dateFormatter)
            if rc != SQLITE_OK { throw connection.error(code: rc, sql: sql) }
            bound += 1
        }
        guard bound == expected else {
            throw FMDatabaseError.bindCount(expected: expected, got: Int(bound), sql: sql)
        }
    }
}
