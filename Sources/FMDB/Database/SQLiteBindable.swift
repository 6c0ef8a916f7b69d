import Foundation

/// A value that binds to a statement parameter with no runtime type test: the fast path's arguments.
///
/// Conforming: the Swift integer types, `Double`, `Float`, `Bool`, `String`, `Data`, `[UInt8]`,
/// `Date` (seconds since 1970, or text in the database's date format), `NSNull` and `Optional` of any
/// of these (nil binds NULL).
public protocol SQLiteBindable {
    /// Binds `self` to parameter `index` (1-based); returns SQLite's result code.
    func bind(to statement: PreparedStatement, at index: Int32) -> Int32
}

// MARK: - Conformances

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension Int: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension Int64: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(self, at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension Int32: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension Int16: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension Int8: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER (past `Int64.max`: the bit pattern, as FMDB).
extension UInt: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(bitPattern: UInt64(self)), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER (past `Int64.max`: the bit pattern, as FMDB).
extension UInt64: SQLiteBindable {
    /// Past Int64.max: the bit pattern, as FMDB.
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(bitPattern: self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension UInt32: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension UInt16: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER.
extension UInt8: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(Int64(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds INTEGER 1 or 0.
extension Bool: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindInt64(self ? 1 : 0, at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds REAL.
extension Double: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindDouble(self, at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds REAL.
extension Float: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindDouble(Double(self), at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds TEXT.
extension String: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        statement.bindText(self, at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds a BLOB (empty data: a zero-length BLOB, not NULL).
extension Data: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        withUnsafeBytes { statement.bindBlob($0, at: index) }
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: `[UInt8]` binds a BLOB (empty: a zero-length BLOB, not NULL).
extension Array: SQLiteBindable where Element == UInt8 {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        withUnsafeBytes { statement.bindBlob($0, at: index) }
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds REAL, seconds since 1970 (FMDB's default), or
/// TEXT in the database's date format when one is set, as FMDB's `[Any]` forms bind a date.
extension Date: SQLiteBindable {
    /// Seconds since 1970 as REAL; the formatted text when the database has a date format
    /// (``FMDatabase/setDateFormat(_:)``), so ``FMResultSet/date(forColumn:)`` reads it back.
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        if let formatter = statement.dateFormatter {
            return statement.bindText(formatter.string(from: self), at: index)
        }
        return statement.bindDouble(timeIntervalSince1970, at: index)
    }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: binds NULL.
extension NSNull: SQLiteBindable {
    /// Binds the value (see `SQLiteBindable`).
    public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 { statement.bindNull(at: index) }
}

/// A ``SQLiteBindable`` value for ``PreparedStatement``: `nil` binds NULL; a value binds as its wrapped type does.
extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    @inline(__always) public func bind(to statement: PreparedStatement, at index: Int32) -> Int32 {
        switch self {
        case .none: return statement.bindNull(at: index)
        case .some(let value): return value.bind(to: statement, at: index)
        }
    }
}
