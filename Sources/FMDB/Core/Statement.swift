import CSQLCipher
import Foundation

/// One prepared `sqlite3_stmt`, finalized exactly once by this owner.
///
/// Not Sendable. The column-name map is built once per statement (not per row or per lookup), so
/// a cached statement reuses it for every query that uses it; it is checked once per run against the
/// columns SQLite gives the statement (which a schema change can change, see `mapsCheckedThisRun`).
final class Statement {
    let connection: Connection
    private(set) var handle: OpaquePointer?
    let sql: String
    /// Handed out to an open result set or an update in progress: the cache must not hand it out again.
    var inUse = false
    /// Owned by the statement cache (reset, not finalized, when a result set is done with it).
    var isCached = false
    /// Whether the linked SQLite counts re-preparations (read once per process, kept here for the look-ups).
    private let countsRepreparations = SQLCipherRuntime.countsRepreparations

    /// Column names as written, in order, and lowercased name to index; built on first use, once per
    /// statement.
    private var columnNames: [String]?
    private var lowercasedColumns: [String: Int32] = [:]
    /// Two columns share a name once lowercased: only the lowercased map then answers as FMDB does.
    private var hasDuplicateNames = false
    /// The in-memory representation of each name in `columnNames` (see `columnIndex(forName:)`), in a
    /// buffer this statement owns, so reading it retains nothing.
    private var columnNameRepresentations = UnsafeMutableBufferPointer<StringRepresentation>(start: nil, count: 0)
    /// SQLite prepares a statement again inside `sqlite3_step`, at the first step of a run after a schema
    /// change, with the columns its SQL now means (`SELECT *` after a table was recreated). The maps are
    /// checked against the columns once a run is under way (see `dropColumnMapsIfPreparedAgain`), then trusted
    /// until the run ends: true from that check until the next reset or the step that ends the run.
    private var mapsCheckedThisRun = false
    /// What the maps were built from, to tell whether SQLite prepared the statement again since: SQLite's
    /// count of re-preparations (`SQLITE_STMTSTATUS_REPREPARE`, SQLite 3.20 and later), or else the names'
    /// bytes, each with its NUL (an address proves nothing: after two re-preparations a new name may sit
    /// where an old one was).
    private var mapsBuiltAtPreparation: Int32 = 0
    /// In a buffer this statement owns, so the check retains nothing.
    private var mapsBuiltFromNames = UnsafeMutableBufferPointer<CChar>(start: nil, count: 0)
    /// Representation buffers of maps built before a schema change, freed on deinit: a result set may
    /// still hold one (`columnNameRepresentationTable()`).
    private var retiredRepresentations: [UnsafeMutableBufferPointer<StringRepresentation>] = []

    init(connection: Connection, handle: OpaquePointer, sql: String) {
        self.connection = connection
        self.handle = handle
        self.sql = sql
    }

    deinit {
        finalize()
        columnNameRepresentations.deallocate()
        for buffer in retiredRepresentations { buffer.deallocate() }
        mapsBuiltFromNames.deallocate()
    }

    func finalize() {
        guard let stmt = handle else { return }
        handle = nil
        // After the connection closed, SQLite has already finalized every statement left on it.
        if !connection.isClosed { sqlite3_finalize(stmt) }
    }

    var isFinalized: Bool { handle == nil || connection.isClosed }

    func reset() {
        mapsCheckedThisRun = false
        if let stmt = handle, !connection.isClosed { sqlite3_reset(stmt) }
    }

    func clearBindings() {
        if let stmt = handle, !connection.isClosed { sqlite3_clear_bindings(stmt) }
    }

    @inline(__always)
    func step() -> Int32 {
        guard let stmt = handle, !connection.isClosed else { return SQLITE_MISUSE }
        let rc = connection.step(stmt)
        // The run is over: the next step starts another (SQLite resets the statement itself), which may
        // prepare it again.
        if rc != SQLITE_ROW { mapsCheckedThisRun = false }
        return rc
    }

    var parameterCount: Int32 {
        guard let stmt = handle else { return 0 }
        return sqlite3_bind_parameter_count(stmt)
    }

    func parameterIndex(_ name: String) -> Int32 {
        guard let stmt = handle else { return 0 }
        return sqlite3_bind_parameter_index(stmt, name)
    }

    var isReadOnly: Bool {
        guard let stmt = handle else { return true }
        return sqlite3_stmt_readonly(stmt) != 0
    }

    // MARK: - Columns

    var columnCount: Int32 {
        guard let stmt = handle else { return 0 }
        return sqlite3_column_count(stmt)
    }

    func columnName(_ index: Int32) -> String? {
        guard let stmt = handle, index >= 0, index < sqlite3_column_count(stmt),
            let name = sqlite3_column_name(stmt, index)
        else { return nil }
        return String(cString: name)
    }

    /// Whether the statement is in a run: stepped, and neither reset nor run to its end. SQLite prepares a
    /// statement again only at the first step of a run, so while this holds its columns stay as they are.
    private var isRunning: Bool {
        guard let stmt = handle, !connection.isClosed else { return false }
        return sqlite3_stmt_busy(stmt) != 0
    }

    /// How many times SQLite has prepared the statement again (nil where SQLite does not count it).
    private var preparationCount: Int32? {
        guard countsRepreparations, let stmt = handle else { return nil }
        return sqlite3_stmt_status(stmt, SQLCipherRuntime.statementStatusReprepare, 0)
    }

    /// Keeps the column names' bytes as SQLite holds them now, each with its NUL, in `mapsBuiltFromNames`.
    private func keepNameBytes() {
        mapsBuiltFromNames.deallocate()
        mapsBuiltFromNames = UnsafeMutableBufferPointer(start: nil, count: 0)
        guard let stmt = handle else { return }
        let names = (0..<sqlite3_column_count(stmt)).map { sqlite3_column_name(stmt, $0) }
        let buffer = UnsafeMutableBufferPointer<CChar>.allocate(
            capacity: names.reduce(0) { $0 + ($1.map(strlen) ?? 0) + 1 })
        var offset = 0
        for name in names {
            let length = name.map(strlen) ?? 0
            if let name, let base = buffer.baseAddress { (base + offset).initialize(from: name, count: length) }
            buffer[offset + length] = 0
            offset += length + 1
        }
        mapsBuiltFromNames = buffer
    }

    /// Whether the columns' names are still, byte for byte, those `mapsBuiltFromNames` holds.
    private func namesMatchBuiltMaps() -> Bool {
        guard let stmt = handle else { return false }
        let count = sqlite3_column_count(stmt)
        guard var built = UnsafePointer(mapsBuiltFromNames.baseAddress) else { return count == 0 }
        let end = built + mapsBuiltFromNames.count
        for index in 0..<count {
            guard var name = sqlite3_column_name(stmt, index) else { return false }
            while true {
                guard built < end, built.pointee == name.pointee else { return false }
                built += 1
                if name.pointee == 0 { break }
                name += 1
            }
        }
        return built == end
    }

    /// Drops the maps when SQLite has prepared the statement again since they were built: checked once a
    /// run, at the first look-up after its first step (before it, the step may still prepare it again).
    private func dropColumnMapsIfPreparedAgain() {
        guard columnNames != nil, !mapsCheckedThisRun else { return }
        let unchanged =
            if let count = preparationCount { count == mapsBuiltAtPreparation } else { namesMatchBuiltMaps() }
        if unchanged {
            mapsCheckedThisRun = isRunning
            return
        }
        columnNames = nil
        lowercasedColumns = [:]
        hasDuplicateNames = false
        if !columnNameRepresentations.isEmpty { retiredRepresentations.append(columnNameRepresentations) }
        columnNameRepresentations = UnsafeMutableBufferPointer(start: nil, count: 0)
    }

    private func buildColumnMaps() -> [String] {
        dropColumnMapsIfPreparedAgain()
        if let columnNames { return columnNames }
        if let count = preparationCount { mapsBuiltAtPreparation = count } else { keepNameBytes() }
        mapsCheckedThisRun = isRunning
        var names: [String] = []
        var lowercased: [String: Int32] = [:]
        let count = columnCount
        names.reserveCapacity(Int(count))
        lowercased.reserveCapacity(Int(count))
        for index in 0..<count {
            let name = columnName(index) ?? ""
            names.append(name)
            // Duplicate names: the last column wins, as in FMDB (its map is built in column order with
            // setObject:forKey:, so later columns overwrite earlier ones).
            lowercased[name.lowercased()] = index
        }
        columnNames = names
        lowercasedColumns = lowercased
        hasDuplicateNames = lowercased.count != names.count
        if StringRepresentation.isAvailable {
            let representations = UnsafeMutableBufferPointer<StringRepresentation>.allocate(capacity: names.count)
            _ = representations.initialize(from: names.map(StringRepresentation.init))
            columnNameRepresentations = representations
        }
        return names
    }

    /// Lowercased column name to index, as FMDB's `columnNameToIndexMap`.
    var columnNameToIndexMap: [String: Int32] {
        _ = buildColumnMaps()
        return lowercasedColumns
    }

    /// Case-insensitive column lookup; -1 when absent.
    ///
    /// First, the name is looked for by its in-memory representation: a literal such as `"id"` (and
    /// any short ASCII name) is stored inline in the `String` itself, so the caller's name and the
    /// statement's have identical bits, and finding it costs a few integer compares, with no string
    /// comparison and no retain. Identical representations always hold equal strings; other names
    /// (longer than 15 bytes, or spelled in another case) fall back to comparing strings: a short
    /// scan for the exact spelling, then the lowercased map.
    func columnIndex(forName name: String) -> Int32 {
        _ = buildColumnMaps()
        // "a" then "A": an exact-spelling match would find "a", FMDB's lowercased map finds "A".
        if hasDuplicateNames { return lowercasedColumns[name.lowercased()] ?? -1 }
        if !columnNameRepresentations.isEmpty {
            let key = StringRepresentation(name)
            // Last match wins, as the lowercased map does for duplicate names.
            var position = columnNameRepresentations.count - 1
            while position >= 0 {
                if columnNameRepresentations[position] == key { return Int32(position) }
                position -= 1
            }
        }
        let names = columnNames ?? buildColumnMaps()
        if names.count <= 32 {
            var index = Int32(names.count) - 1
            while index >= 0 {
                if names[Int(index)] == name { return index }
                index -= 1
            }
        }
        return lowercasedColumns[name.lowercased()] ?? -1
    }

    /// The representations of the column names, for a result set to search itself (see
    /// `columnIndex(forName:)`); nil when an exact-bits match could be wrong (two names equal once
    /// lowercased) or representations are unavailable. Owned by this statement: valid while it lives.
    func columnNameRepresentationTable() -> UnsafeBufferPointer<StringRepresentation>? {
        _ = buildColumnMaps()
        guard !hasDuplicateNames, !columnNameRepresentations.isEmpty else { return nil }
        return UnsafeBufferPointer(columnNameRepresentations)
    }

    @inline(__always)
    func isValidColumn(_ index: Int32) -> Bool {
        guard let stmt = handle else { return false }
        return index >= 0 && index < sqlite3_column_count(stmt)
    }

    @inline(__always)
    func columnType(_ index: Int32) -> Int32 {
        guard let stmt = handle else { return SQLITE_NULL }
        return sqlite3_column_type(stmt, index)
    }

    @inline(__always)
    func int64(at index: Int32) -> Int64 {
        guard let stmt = handle else { return 0 }
        return sqlite3_column_int64(stmt, index)
    }

    @inline(__always)
    func int32(at index: Int32) -> Int32 {
        guard let stmt = handle else { return 0 }
        return sqlite3_column_int(stmt, index)
    }

    @inline(__always)
    func double(at index: Int32) -> Double {
        guard let stmt = handle else { return 0 }
        return sqlite3_column_double(stmt, index)
    }

    /// Text of a column, decoded with its full byte length (embedded NULs kept; invalid UTF-8
    /// repaired with U+FFFD). Nil for NULL.
    @inline(__always)
    func string(at index: Int32) -> String? {
        guard let stmt = handle else { return nil }
        return ColumnAccess.string(stmt, index)
    }

    @inline(__always)
    func byteCount(at index: Int32) -> Int {
        guard let stmt = handle else { return 0 }
        return Int(sqlite3_column_bytes(stmt, index))
    }

    func utf8Pointer(at index: Int32) -> UnsafePointer<UInt8>? {
        guard let stmt = handle else { return nil }
        return sqlite3_column_text(stmt, index)
    }

    /// Bytes of a column, copied. Nil for NULL and for a zero-length BLOB (as FMDB).
    @inline(__always)
    func data(at index: Int32) -> Data? {
        guard let stmt = handle else { return nil }
        return ColumnAccess.data(stmt, index)
    }

    /// Bytes of a column without a copy: valid until the next step, reset or close. nil for NULL and for
    /// a zero-length BLOB or TEXT, for which `sqlite3_column_blob` answers NULL: no separate type check.
    func dataNoCopy(at index: Int32) -> Data? {
        guard let stmt = handle, let bytes = sqlite3_column_blob(stmt, index) else { return nil }
        let count = Int(sqlite3_column_bytes(stmt, index))
        return Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: bytes), count: count, deallocator: .none)
    }

    /// Calls `body` with the column's bytes in place (no copy); nil for NULL. `sqlite3_column_blob` first:
    /// it answers NULL only for NULL, an empty value or an out-of-memory conversion, so the type is read
    /// only then (about 64 instructions a call saved on every other value; callgrind, W2 fast). An
    /// out-of-memory conversion reads as nil: SQLite resets the value to NULL when it fails.
    func withUnsafeBytes<R>(at index: Int32, _ body: (UnsafeRawBufferPointer?) throws -> R) rethrows -> R {
        guard let stmt = handle else { return try body(nil) }
        if let bytes = sqlite3_column_blob(stmt, index) {
            return try body(UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(stmt, index))))
        }
        return try body(
            sqlite3_column_type(stmt, index) == SQLITE_NULL ? nil : UnsafeRawBufferPointer(start: nil, count: 0))
    }
}

/// The two machine words a `String` is made of (its count and flags, and its inline bytes or storage
/// reference), copied without retaining anything. Two strings with identical words are equal: a small
/// string's words are its bytes, a large one's point to the same immutable storage. Compared only with
/// representations of strings that are still alive (the statement holds its column names), so a
/// storage address can never have been reused for other text.
/// Kept, measured: comparing the names as `[String]` with `==` instead costs ~390 instructions a row of
/// five lookups by name (W2 `compat`, callgrind on SQLCipher 3.4.1: 97.0 M -> 104.9 M, +11% over start-up).
struct StringRepresentation: Equatable {
    let countAndFlags: UInt64
    let object: UInt64

    /// Whether `String` is the two 64-bit words this reads (every 64-bit platform). Elsewhere no
    /// representation is ever made and lookups compare strings.
    static let isAvailable = MemoryLayout<String>.size == MemoryLayout<(UInt64, UInt64)>.size

    /// Only when `isAvailable`.
    init(_ string: String) {
        (countAndFlags, object) = unsafeBitCast(string, to: (UInt64, UInt64).self)
    }
}

/// Column reads on a `sqlite3_stmt` the caller knows is live and positioned (an open result set's): no
/// optional checks and no retain of the owning `Statement` on the per-value path.
enum ColumnAccess {
    @inline(__always)
    static func step(_ stmt: OpaquePointer, on connection: Connection) -> Int32 { connection.step(stmt) }

    @inline(__always)
    static func count(_ stmt: OpaquePointer) -> Int32 { sqlite3_column_count(stmt) }

    @inline(__always)
    static func type(_ stmt: OpaquePointer, _ index: Int32) -> Int32 { sqlite3_column_type(stmt, index) }

    @inline(__always)
    static func int64(_ stmt: OpaquePointer, _ index: Int32) -> Int64 { sqlite3_column_int64(stmt, index) }

    @inline(__always)
    static func int32(_ stmt: OpaquePointer, _ index: Int32) -> Int32 { sqlite3_column_int(stmt, index) }

    @inline(__always)
    static func double(_ stmt: OpaquePointer, _ index: Int32) -> Double { sqlite3_column_double(stmt, index) }

    @inline(__always)
    static func utf8Pointer(_ stmt: OpaquePointer, _ index: Int32) -> UnsafePointer<UInt8>? {
        sqlite3_column_text(stmt, index)
    }

    /// Text with its full byte length (embedded NULs kept; invalid UTF-8 repaired with U+FFFD, as
    /// `String(decoding:as:)` does). nil for NULL, which is the only value (besides an out-of-memory
    /// conversion) for which `sqlite3_column_text` answers NULL: no separate type check.
    /// `String(unsafeUninitializedCapacity:initializingUTF8With:)` copies then validates in place, about
    /// 75 instructions less per short string than `String(decoding:as:)` (callgrind; same repairs).
    @inline(__always)
    static func string(_ stmt: OpaquePointer, _ index: Int32) -> String? {
        guard let text = sqlite3_column_text(stmt, index) else { return nil }
        let count = Int(sqlite3_column_bytes(stmt, index))
        return String(unsafeUninitializedCapacity: count) { buffer in
            guard let base = buffer.baseAddress, count > 0 else { return 0 }
            base.initialize(from: text, count: count)
            return count
        }
    }

    /// Bytes, copied. nil for NULL and for a zero-length BLOB (as FMDB): `sqlite3_column_blob` answers
    /// NULL for exactly those, so no separate type check.
    @inline(__always)
    static func data(_ stmt: OpaquePointer, _ index: Int32) -> Data? {
        guard let bytes = sqlite3_column_blob(stmt, index) else { return nil }
        return Data(bytes: bytes, count: Int(sqlite3_column_bytes(stmt, index)))
    }
}
