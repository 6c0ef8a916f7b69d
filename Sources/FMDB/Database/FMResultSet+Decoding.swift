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
    /// `Double`, a `String?`, a `Data?`) runs about 1.35 times the instructions of reading the same five
    /// columns by index with the typed getters, and takes about 1.5 times their time (BENCHMARKS.md,
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
        // Not retained here (a retain and a release per row): the result set holds its decoder, and
        // `retire()` keeps it alive when the result set lets it go while a row is decoded.
        unowned(unsafe) let decoder: RowDecoder
        if let existing = rowDecoder { decoder = existing } else { decoder = try makeRowDecoder(handle) }
        decoder.begin(handle: handle, type: T.self).pointee.values.locate(handle)
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

/// Thrown by a column's decoder when the value asks for a keyed or unkeyed container: the column is then
/// read as JSON text.
private struct NeedsJSON: Error {}

/// Where each key of one key type finds its column, for a key type whose values are told apart by one
/// byte (a synthesized `CodingKeys` enum: its case's tag): the column of tag `t` is `columns[t]`, filled
/// at the first request of that key. Built once per key type and result set, so a row costs one byte
/// read and one array read per property, whatever order `init(from:)` asks in: no string is made,
/// compared or hashed per row.
struct TagTable {
    /// Not looked up yet (-1 is a key the query has no column for).
    static let unresolved = Int32.min
    var columns: UnsafeMutablePointer<Int32>
    var capacity: Int

    static func make() -> UnsafeMutablePointer<TagTable> {
        let table = UnsafeMutablePointer<TagTable>.allocate(capacity: 1)
        let columns = UnsafeMutablePointer<Int32>.allocate(capacity: 16)
        columns.initialize(repeating: unresolved, count: 16)
        table.initialize(to: TagTable(columns: columns, capacity: 16))
        return table
    }

    /// Room for `tag` (at most 255).
    mutating func grow(toHold tag: Int) {
        let capacity = Swift.max(tag + 1, self.capacity * 2)
        let larger = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
        larger.initialize(from: columns, count: self.capacity)
        (larger + self.capacity).initialize(repeating: Self.unresolved, count: capacity - self.capacity)
        columns.deallocate()
        columns = larger
        self.capacity = capacity
    }

    static func free(_ table: UnsafeMutablePointer<TagTable>) {
        table.pointee.columns.deallocate()
        table.deallocate()
    }
}

/// What a row decoder's containers read per property, kept outside the decoder object (see `RowContainer`).
struct RowState {
    /// Whether `FMResultSet.decode` is running (`RowDecoder.isDecoding`).
    var active = false
    /// Where the row's values are.
    var values = RowValues()
}

/// A reference that does not keep its object alive.
private struct WeakReference {
    weak var object: AnyObject?
}

/// Decodes rows of one statement, kept by the result set across rows (dropped on close and on a new
/// bind: a statement SQLite prepares again after a schema change may have other columns).
///
/// Per row, the work is what the `Decoder` protocol makes unavoidable plus the column reads:
/// - One keyed container per key type, made at the first row and handed out again at every row
///   (`KeyedDecodingContainer` boxes its container in a class instance: an allocation per row otherwise).
/// - Keys to columns through a `TagTable` per key type (synthesized `CodingKeys`); other key types
///   (a struct with a `String`, an enum with over 256 cases) through a plan by request position, checked
///   by name: a synthesized `init(from:)` asks for its keys in the same order every row.
/// - The containers hold this decoder `unowned(unsafe)` and so are plain bytes: the standard library's
///   box copies its container at every property, which for a reference would be a retain and a release.
///   `retire()` keeps that sound: a container that outlived its `init(from:)` keeps the decoder alive.
/// - Each column is read through one `ColumnValue` (its type and contents from one `sqlite3_value`), found
///   from column 0's through `RowValues`: one call into SQLite per row to locate the values, not one per
///   column.
///
/// Not Sendable: used on the result set's thread only.
final class RowDecoder: Decoder {
    let statement: Statement
    let dateFormatter: DateFormatter?
    // Unchecked exclusivity: one decoder is used by one result set on one thread, and none of these is
    // ever accessed re-entrantly (the dynamic checks cost more than the column reads on a scan).
    @exclusivity(unchecked) private(set) var handle: OpaquePointer
    @exclusivity(unchecked) private var typeName: Any.Type = Any.self
    /// Set while `FMResultSet.decode` runs: a container or column decoder kept past its `init(from:)`
    /// throws instead of reading a row that has moved on (or a statement that is gone).
    var isDecoding: Bool { state.pointee.active }
    /// The flag behind `isDecoding` and where the row's values are, where the containers read them
    /// without touching this object.
    private let state: UnsafeMutablePointer<RowState>
    /// Per request position: the key asked for and its column (-1: the query has no such column). For key
    /// types without a `TagTable`.
    @exclusivity(unchecked) private var plan: [(name: String, index: Int32)] = []
    @exclusivity(unchecked) private var cursor = 0
    /// The keyed containers handed out, one per key type: the type, the box (`KeyedDecodingContainer`'s
    /// only stored property, as an object) and its tag table. The last one used is checked first.
    @exclusivity(unchecked) private var containerTypes: [ObjectIdentifier] = []
    @exclusivity(unchecked) private var boxes: [AnyObject] = []
    @exclusivity(unchecked) private var tagTables: [UnsafeMutablePointer<TagTable>] = []
    /// Per key type, a `CachedContainer<Key>` holding its box (the last one used is checked first).
    @exclusivity(unchecked) private var cachedContainers: [AnyObject] = []
    @exclusivity(unchecked) private var lastKeyType: ObjectIdentifier?
    @exclusivity(unchecked) private var lastCached: AnyObject?

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(statement: Statement, handle: OpaquePointer, dateFormatter: DateFormatter?) {
        self.statement = statement
        self.handle = handle
        self.dateFormatter = dateFormatter
        state = UnsafeMutablePointer<RowState>.allocate(capacity: 1)
        state.initialize(to: RowState())
    }

    deinit {
        for table in tagTables { TagTable.free(table) }
        state.deallocate()
    }

    /// Starts decoding the current row of `handle` (a row with at least one column). The caller then finds
    /// the row's values through the state returned: outside this object's methods, so the call into SQLite
    /// does not make the compiler retain and release the decoder around it.
    @inline(__always)
    func begin(handle: OpaquePointer, type: Any.Type) -> UnsafeMutablePointer<RowState> {
        self.handle = handle
        self.typeName = type
        cursor = 0
        state.pointee.active = true
        return state
    }

    @inline(__always)
    func end() {
        state.pointee.active = false
        state.pointee.values.leave()
    }

    /// Called by the result set before it steps: a row decoded from inside an `init(from:)` that steps
    /// its own result set reads its values from SQLite again.
    @inline(__always)
    func leaveRow() { state.pointee.values.leave() }

    /// Called when the result set lets the decoder go (closed, or bound again). A container still referenced
    /// elsewhere (kept by an `init(from:)` past its return) points at this decoder without holding it, and
    /// `FMResultSet.decode` does not hold it either: when a container is still referenced, or when a row is
    /// being decoded (an `init(from:)` that closes its own result set), the decoder stays alive (a small
    /// leak, only for that misuse), and its containers throw from then on instead of reading a statement
    /// that may be gone. Whether a container is referenced is seen through weak references: the boxes this
    /// decoder alone held are gone once it lets them go. (`isKnownUniquelyReferenced` cannot tell: on an
    /// `AnyObject` it answers false even for a fresh object here.)
    func retire() {
        var keepAlive = state.pointee.active
        state.pointee.active = false
        state.pointee.values.leave()
        lastCached = nil
        lastKeyType = nil
        containerTypes = []
        cachedContainers = []
        if !boxes.isEmpty {
            let probes = boxes.map { WeakReference(object: $0) }
            boxes = []
            if probes.contains(where: { $0.object != nil }) { keepAlive = true }
        }
        if keepAlive { _ = Unmanaged.passRetained(self) }
    }

    /// The error for a container or column decoder used after its `init(from:)` returned.
    func escaped() -> FMDatabaseError {
        FMDatabaseError.misuse(
            "A decoding container was used after its init(from:) returned or its result set was closed: "
                + "decode the row again instead",
            sql: statement.sql)
    }

    // MARK: Columns

    /// The column named `name` (a coding key's string value), or -1 when the query has none by that name;
    /// for key types without a tag table.
    func lookup(_ name: String) -> Int32 {
        let position = cursor
        cursor &+= 1
        if position < plan.count {
            let entry = plan[position]
            if entry.name == name { return entry.index }
        }
        return resolve(name, at: position)
    }

    private func resolve(_ name: String, at position: Int) -> Int32 {
        let index = statement.columnIndex(forName: name)
        if position < plan.count {
            plan[position] = (name, index)
        } else if position == plan.count {
            plan.append((name, index))
        }
        return index
    }

    /// The column of the key whose tag is `tag` and name `name`, looked up and remembered in `table`.
    func resolve(_ name: String, tag: Int, in table: UnsafeMutablePointer<TagTable>) -> Int32 {
        let index = statement.columnIndex(forName: name)
        if tag >= table.pointee.capacity { table.pointee.grow(toHold: tag) }
        table.pointee.columns[tag] = index
        return index
    }

    func missingColumn(_ name: String) -> FMDatabaseError {
        failure("No column named '\(name)' in the result, needed to decode \(typeName)")
    }

    @inline(__always)
    func read(_ index: Int32) -> ColumnValue { state.pointee.values.value(handle, index) }

    // MARK: Errors

    func failure(_ message: String) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISMATCH, message: message, sql: statement.sql)
    }

    private func storageName(_ index: Int32) -> String {
        switch read(index).type {
        case SQLITE_INTEGER: return "INTEGER"
        case SQLITE_FLOAT: return "REAL"
        case SQLITE_TEXT: return "TEXT"
        case SQLITE_BLOB: return "BLOB"
        default: return "NULL"
        }
    }

    private func columnLabel(_ index: Int32) -> String {
        "column '\(statement.columnName(index) ?? String(index))'"
    }

    func mismatch(_ index: Int32, _ type: Any.Type) -> FMDatabaseError {
        let found = storageName(index)
        if found == "NULL" {
            return failure("Cannot decode \(columnLabel(index)) as \(type): it is NULL (make the property optional)")
        }
        return failure("Cannot decode \(columnLabel(index)) as \(type): it holds \(found)")
    }

    func outOfRange(_ index: Int32, _ type: Any.Type) -> FMDatabaseError {
        failure("Cannot decode \(columnLabel(index)) as \(type): its value is out of the type's range")
    }

    // MARK: Values (`value` is column `index` of the current row; the index names it in errors)
    //
    // Out of line: a container reads the usual case of each type itself and calls these for the rest
    // (conversions and errors), which keeps the code it runs per property small.

    @inline(never)
    func integer<I: FixedWidthInteger>(_ type: I.Type, _ value: ColumnValue, _ index: Int32) throws -> I {
        switch value.type {
        case SQLITE_INTEGER:
            guard let result = I(exactly: value.int64) else { throw outOfRange(index, I.self) }
            return result
        case SQLITE_FLOAT:
            let double = value.double
            guard double.rounded(.towardZero) == double else { throw mismatch(index, I.self) }
            guard let result = I(exactly: double) else { throw outOfRange(index, I.self) }
            return result
        default:
            throw mismatch(index, I.self)
        }
    }

    @inline(never)
    func double(_ value: ColumnValue, _ index: Int32, as type: Any.Type = Double.self) throws -> Double {
        switch value.type {
        case SQLITE_INTEGER, SQLITE_FLOAT: return value.double
        default: throw mismatch(index, type)
        }
    }

    @inline(never)
    func bool(_ value: ColumnValue, _ index: Int32) throws -> Bool {
        guard value.type == SQLITE_INTEGER else { throw mismatch(index, Bool.self) }
        return value.int64 != 0
    }

    @inline(never)
    func string(_ value: ColumnValue, _ index: Int32, as type: Any.Type = String.self) throws -> String {
        guard value.type == SQLITE_TEXT, let text = value.string else { throw mismatch(index, type) }
        return text
    }

    @inline(never)
    func data(_ value: ColumnValue, _ index: Int32) throws -> Data {
        switch value.type {
        case SQLITE_BLOB, SQLITE_TEXT: return value.data
        default: throw mismatch(index, Data.self)
        }
    }

    func date(_ value: ColumnValue, _ index: Int32) throws -> Date {
        switch value.type {
        case SQLITE_INTEGER, SQLITE_FLOAT:
            return Date(timeIntervalSince1970: value.double)
        case SQLITE_TEXT:
            guard let dateFormatter else {
                throw failure(
                    "Cannot decode \(columnLabel(index)) as Date: it holds TEXT and the database has "
                        + "no date format (FMDatabase.setDateFormat(_:)); without one dates are numbers")
            }
            guard let text = value.string, let date = dateFormatter.date(from: text) else {
                throw failure(
                    "Cannot decode \(columnLabel(index)) as Date: its text does not match the "
                        + "database's date format")
            }
            return date
        default:
            throw mismatch(index, Date.self)
        }
    }

    /// Any `Decodable` from column `index`.
    func value<T: Decodable>(_ type: T.Type, _ index: Int32) throws -> T {
        try value(type, read(index), index)
    }

    /// Any `Decodable` from one column: the known scalar types directly, then the type's own
    /// `init(from:)` over the column (enums by raw value, `Optional`), then JSON text.
    func value<T: Decodable>(_ type: T.Type, _ value: ColumnValue, _ index: Int32) throws -> T {
        // T is exactly the type compared with, so the bit casts are identity conversions (no dynamic
        // cast on the hot path).
        if T.self == Data.self { return unsafeBitCast(try data(value, index), to: T.self) }
        if T.self == Date.self { return unsafeBitCast(try date(value, index), to: T.self) }
        if T.self == URL.self {
            guard let url = URL(string: try string(value, index, as: URL.self)) else {
                throw failure("Cannot decode \(columnLabel(index)) as URL: its text is not a URL")
            }
            return unsafeBitCast(url, to: T.self)
        }
        do {
            return try T(from: ColumnDecoder(row: self, index: index))
        } catch is NeedsJSON {
            return try json(T.self, index)
        } catch let error as FMDatabaseError {
            throw error
        } catch {
            throw failure("Cannot decode \(columnLabel(index)) as \(T.self): \(FMResultSet.describe(error))")
        }
    }

    private func json<T: Decodable>(_ type: T.Type, _ index: Int32) throws -> T {
        let value = read(index)
        let kind = value.type
        guard kind == SQLITE_TEXT || kind == SQLITE_BLOB else { throw mismatch(index, T.self) }
        do {
            return try JSONDecoder().decode(T.self, from: value.data)
        } catch {
            throw failure(
                "Cannot decode \(columnLabel(index)) as \(T.self) from JSON text: "
                    + FMResultSet.describe(error))
        }
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if lastKeyType == ObjectIdentifier(Key.self), let cached = lastCached {
            // Made for this very Key type; the container is handed out without its type metadata
            // (see `ContainerSource`).
            let entry = unsafeDowncast(cached, to: CachedContainer<Key>.self)
            return entry.source.container(entry.box)
        }
        return makeContainer(Key.self)
    }

    private func makeContainer<Key: CodingKey>(_ type: Key.Type) -> KeyedDecodingContainer<Key> {
        let key = ObjectIdentifier(Key.self)
        if let position = containerTypes.firstIndex(of: key) {
            let box = boxes[position]
            lastKeyType = key
            lastCached = cachedContainers[position]
            return unsafeBitCast(box, to: KeyedDecodingContainer<Key>.self)
        }
        // A key type whose values are told apart by one byte (a synthesized CodingKeys enum) gets a tag
        // table; a key that holds a reference or more bytes is looked up by name.
        var table: UnsafeMutablePointer<TagTable>?
        if _isPOD(Key.self) && MemoryLayout<Key>.size <= 1 {
            let made = TagTable.make()
            tagTables.append(made)
            table = made
        }
        let container = KeyedDecodingContainer(
            RowContainer<Key>(row: self, handle: handle, state: UnsafePointer(state), tags: table))
        if MemoryLayout<KeyedDecodingContainer<Key>>.size == MemoryLayout<AnyObject>.size {
            let box = unsafeBitCast(container, to: AnyObject.self)
            let cached = CachedContainer<Key>(box: box)
            containerTypes.append(key)
            boxes.append(box)
            cachedContainers.append(cached)
            lastKeyType = key
            lastCached = cached
        } else {
            // A standard library whose container is not one reference: this container cannot be tracked, so
            // one kept past its `init(from:)` would not be seen. The decoder it points to is kept alive for
            // good instead (a small leak, never a read of freed memory). `CodableRowDecoderReuseTests` pins the
            // layout the tracking relies on.
            _ = Unmanaged.passRetained(self)
        }
        return container
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw failure(
            "Cannot decode \(typeName) from a row as a list: decode a type with properties named "
                + "after the columns")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        guard ColumnAccess.count(handle) > 0 else { throw failure("The row has no column to decode \(typeName) from") }
        return ColumnDecoder(row: self, index: 0)
    }
}

/// Hands out a cached keyed container again without looking up `KeyedDecodingContainer<Key>`'s type
/// metadata. The decoder's `container(keyedBy:)` is generic code the compiler cannot specialise (it is
/// called through `Decoder` from the caller's `init(from:)`), and a value of a generic standard library
/// type can only be copied there through its metadata, which unspecialised code finds with a hash lookup
/// in the runtime's cache, about 330 instructions per row (callgrind). Here the type is this protocol's
/// associated type: unspecialised code reads it from the conformance's witness table, where the runtime
/// keeps it once resolved (a few loads). The decoder reaches the source through `CachedContainer<Key>`,
/// whose fields have one layout for every `Key`, so reading them needs no metadata either.
private protocol ContainerSource<Container>: AnyObject {
    associatedtype Container
    /// `box` as the container it is the only stored property of: `box` must come from a `Container`.
    func container(_ box: AnyObject) -> Container
}

extension ContainerSource {
    // Kept generic over `Self` on purpose: a copy specialised for `KeyedContainerSource<Key>` would name
    // `KeyedDecodingContainer<Key>` directly and look its metadata up again.
    @_semantics("optimize.sil.specialize.generic.never")
    @inline(never)
    func container(_ box: AnyObject) -> Container { unsafeBitCast(box, to: Container.self) }
}

private final class KeyedContainerSource<Key: CodingKey>: ContainerSource {
    typealias Container = KeyedDecodingContainer<Key>
}

/// One key type's container, kept by the decoder across rows: its box (`KeyedDecodingContainer`'s only
/// stored property) and the source that hands it out as a `KeyedDecodingContainer<Key>`.
private final class CachedContainer<Key: CodingKey> {
    let box: AnyObject
    let source: any ContainerSource<KeyedDecodingContainer<Key>> = KeyedContainerSource<Key>()

    init(box: AnyObject) { self.box = box }
}

/// The properties of a row: one column per key. Plain bytes (see `RowDecoder`): the decoder is held
/// `unowned(unsafe)`, and it outlives every container that still exists (`RowDecoder.retire()`). The
/// usual outcome of each property (the column is there and holds the type) is read without touching the
/// decoder object (no retain, no release); anything else goes to the decoder, which makes the error.
/// The `decode` methods are `@inline(__always)`, so each is compiled into the protocol witness the
/// standard library's box calls (one call less per property), with only the usual case inline: the rest
/// (`slowLookup`, the decoder's conversions and errors) is out of line, which keeps the code run per row
/// small (callgrind, W2 through Codable: about 130 instructions a row fewer).
private struct RowContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    unowned(unsafe) let row: RowDecoder
    /// The result set's statement (the same for every row) and the decoder's `RowState`.
    let handle: OpaquePointer
    let state: UnsafePointer<RowState>
    /// The key type's tag table; nil when keys are looked up by name.
    let tags: UnsafeMutablePointer<TagTable>?

    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] {
        (0..<row.statement.columnCount).compactMap { row.statement.columnName($0).flatMap(Key.init(stringValue:)) }
    }

    /// The column of `key`, -1 when the query has none. The usual case (a key whose column is known, while
    /// the row is decoded) is a few loads here; everything else is in `slowLookup`, out of line, so the
    /// code run per property stays small.
    @inline(__always)
    private func lookup(_ key: Key) throws -> Int32 {
        if let tags, state.pointee.active {
            // The key's one byte (a one-case enum has none: its only value is tag 0).
            let tag = MemoryLayout<Key>.size == 0 ? 0 : Int(unsafeBitCast(key, to: UInt8.self))
            if tag < tags.pointee.capacity {
                let index = tags.pointee.columns[tag]
                if index >= 0 { return index }
            }
        }
        return try slowLookup(key)
    }

    /// `lookup` for a key not found by the fast path: a container used after its `init(from:)`, a key type
    /// looked up by name, a key not resolved yet, or a key the query has no column for (-1).
    @inline(never)
    private func slowLookup(_ key: Key) throws -> Int32 {
        guard state.pointee.active else { throw row.escaped() }
        guard let tags else { return row.lookup(key.stringValue) }
        let tag = MemoryLayout<Key>.size == 0 ? 0 : Int(unsafeBitCast(key, to: UInt8.self))
        if tag < tags.pointee.capacity {
            let index = tags.pointee.columns[tag]
            if index != TagTable.unresolved { return index }
        }
        return row.resolve(key.stringValue, tag: tag, in: tags)
    }

    /// Column `index`'s value in the current row.
    @inline(__always)
    private func columnValue(_ index: Int32) -> ColumnValue { state.pointee.values.value(handle, index) }

    /// The column of `key` (throws when the query has none).
    @inline(__always)
    private func column(_ key: Key) throws -> Int32 {
        let index = try lookup(key)
        guard index >= 0 else { throw missingColumn(key) }
        return index
    }

    @inline(never)
    private func missingColumn(_ key: Key) -> FMDatabaseError { row.missingColumn(key.stringValue) }

    func contains(_ key: Key) -> Bool { ((try? lookup(key)) ?? -1) >= 0 }

    func decodeNil(forKey key: Key) throws -> Bool {
        let index = try lookup(key)
        return index < 0 || columnValue(index).type == SQLITE_NULL
    }

    @inline(__always)
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        let index = try column(key)
        return try row.bool(columnValue(index), index)
    }
    @inline(__always)
    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        let index = try column(key)
        let value = columnValue(index)
        if value.type == SQLITE_TEXT, let text = value.string { return text }
        return try row.string(value, index)
    }
    @inline(__always)
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let index = try column(key)
        let value = columnValue(index)
        let kind = value.type
        if kind == SQLITE_FLOAT || kind == SQLITE_INTEGER { return value.double }
        return try row.double(value, index)
    }
    @inline(__always)
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        let index = try column(key)
        return Float(try row.double(columnValue(index), index, as: Float.self))
    }
    @inline(__always)
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try integer(key) }
    @inline(__always)
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key) }
    @inline(__always)
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key) }
    @inline(__always)
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key) }
    @inline(__always)
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try integer(key) }
    @inline(__always)
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key) }
    @inline(__always)
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key) }
    @inline(__always)
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key) }
    @inline(__always)
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key) }
    @inline(__always)
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key) }
    @inline(__always)
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let index = try column(key)
        let value = columnValue(index)
        if T.self == Data.self, value.type == SQLITE_BLOB {
            var data = value.data
            return take(&data, as: T.self)
        }
        return try row.value(type, value, index)
    }

    @inline(__always)
    private func integer<I: FixedWidthInteger>(_ key: Key) throws -> I {
        let index = try column(key)
        let value = columnValue(index)
        if value.type == SQLITE_INTEGER, let result = I(exactly: value.int64) { return result }
        return try row.integer(I.self, value, index)
    }

    /// The column of `key`, its value and the value's type unless it is NULL or missing (nil then).
    @inline(__always)
    private func present(_ key: Key) throws -> (ColumnValue, Int32, kind: Int32)? {
        let index = try lookup(key)
        guard index >= 0 else { return nil }
        let value = columnValue(index)
        let kind = value.type
        return kind == SQLITE_NULL ? nil : (value, index, kind)
    }

    @inline(__always)
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let (value, index, _) = try present(key) else { return nil }
        return try row.bool(value, index)
    }
    @inline(__always)
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let (value, index, kind) = try present(key) else { return nil }
        if kind == SQLITE_TEXT, let text = value.string { return text }
        return try row.string(value, index)
    }
    @inline(__always)
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        guard let (value, index, kind) = try present(key) else { return nil }
        if kind == SQLITE_FLOAT || kind == SQLITE_INTEGER { return value.double }
        return try row.double(value, index)
    }
    @inline(__always)
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        guard let (value, index, _) = try present(key) else { return nil }
        return Float(try row.double(value, index, as: Float.self))
    }
    @inline(__always)
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try integerIfPresent(key) }
    @inline(__always)
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let (value, index, kind) = try present(key) else { return nil }
        if T.self == Data.self, kind == SQLITE_BLOB {
            var data = value.data
            return take(&data, as: T.self)
        }
        return try row.value(type, value, index)
    }

    @inline(__always)
    private func integerIfPresent<I: FixedWidthInteger>(_ key: Key) throws -> I? {
        guard let (value, index, kind) = try present(key) else { return nil }
        if kind == SQLITE_INTEGER, let result = I(exactly: value.int64) { return result }
        return try row.integer(I.self, value, index)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw row.failure(
            "Cannot decode column '\(key.stringValue)' as a nested container: decode a "
                + "Decodable property instead (it is read as JSON text)")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw row.failure(
            "Cannot decode column '\(key.stringValue)' as a nested list: decode an array "
                + "property instead (it is read as JSON text)")
    }

    func superDecoder() throws -> any Decoder { row }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        ColumnDecoder(row: row, index: try column(key))
    }
}

/// The `Data` at `pointer` as `T`, which must be `Data`, moved out (an empty `Data` is left behind).
/// `unsafeBitCast` to `T` copies through `T`'s value witnesses and then destroys the original: about 50
/// instructions a BLOB more (callgrind). `&data` passed here gives the address without a generic call
/// (`withUnsafeMutablePointer` is not inlined in this unspecialised code).
@inline(__always)
private func take<T>(_ pointer: UnsafeMutablePointer<Data>, as type: T.Type) -> T {
    let result = UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: T.self).move()
    pointer.initialize(to: Data())
    return result
}

/// One column as a single value: what an enum's raw value, an `Optional` or a `UUID` decodes from.
/// A keyed or unkeyed container request means the column holds JSON text (`NeedsJSON`).
private struct ColumnDecoder: Decoder, SingleValueDecodingContainer {
    let row: RowDecoder
    let index: Int32

    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> { throw NeedsJSON() }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw NeedsJSON() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// The column's value; throws when used after its `init(from:)` returned.
    @inline(__always)
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
