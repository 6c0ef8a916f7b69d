import Foundation

/// An SQLite result code, primary or extended, that errors can be matched against with `~=`: in a `switch`
/// over a code, or in a `catch` clause, without comparing domains and integers.
///
/// ```swift
/// do {
///     try db.setKey(using: provider)
/// } catch FMResultCode.notADatabase {
///     print("wrong key")
/// } catch FMResultCode.busy {
///     print("locked: try again")
/// }
/// ```
///
/// A primary code matches every extended code of its family (`.ioError` matches `SQLITE_IOERR_WRITE`); an
/// extended code matches only itself. An error matches when it is an ``FMDatabaseError`` (or an `NSError`
/// in the `FMDatabase` domain) whose code does.
///
/// Related SQLite documentation: <https://www.sqlite.org/rescode.html>
///
/// - Note: FMDB compatibility: an addition (FMDB users compare `code` with `SQLITE_*` constants, which
///   still works).
public struct FMResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code, as SQLite's `sqlite3_extended_errcode` gives it.
    public let rawValue: Int32

    /// A result code from its value (`SQLITE_BUSY`, `SQLITE_IOERR_WRITE`, ...).
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The primary code of an extended one (its low 8 bits); a primary code is its own.
    public var primary: FMResultCode { FMResultCode(rawValue: rawValue & 0xFF) }

    /// SQLite's English text for the code.
    public var description: String { "\(rawValue) (\(FMDatabaseError.defaultMessage(for: rawValue)))" }

    /// `SQLITE_ERROR`: a generic error (an SQL error, a missing table).
    public static let error = FMResultCode(rawValue: SQLITE_ERROR)
    /// `SQLITE_PERM`: access denied; here also a key or key slot file others may read or write, and a key slot
    /// unlock over its work budget.
    public static let permission = FMResultCode(rawValue: SQLITE_PERM)
    /// `SQLITE_BUSY`: another connection holds a lock.
    public static let busy = FMResultCode(rawValue: SQLITE_BUSY)
    /// `SQLITE_LOCKED`: a conflict inside this connection's shared cache.
    public static let locked = FMResultCode(rawValue: SQLITE_LOCKED)
    /// `SQLITE_NOMEM`: a memory allocation failed; SQLCipher 4.7 and later also report every page read of a
    /// connection whose page once failed its check this way.
    public static let outOfMemory = FMResultCode(rawValue: SQLITE_NOMEM)
    /// `SQLITE_READONLY`: a read-only file, file system or connection.
    public static let readOnly = FMResultCode(rawValue: SQLITE_READONLY)
    /// `SQLITE_INTERRUPT`: the statement was interrupted (a cancelled task).
    public static let interrupted = FMResultCode(rawValue: SQLITE_INTERRUPT)
    /// `SQLITE_IOERR`: an I/O error.
    public static let ioError = FMResultCode(rawValue: SQLITE_IOERR)
    /// `SQLITE_CORRUPT`: the file is damaged (also a damaged key slot file).
    public static let corrupt = FMResultCode(rawValue: SQLITE_CORRUPT)
    /// `SQLITE_FULL`: the disk is full.
    public static let full = FMResultCode(rawValue: SQLITE_FULL)
    /// `SQLITE_CANTOPEN`: the file cannot be opened (missing, a directory, no permission).
    public static let cannotOpen = FMResultCode(rawValue: SQLITE_CANTOPEN)
    /// `SQLITE_CONSTRAINT`: a UNIQUE, NOT NULL, CHECK or foreign key constraint failed.
    public static let constraint = FMResultCode(rawValue: SQLITE_CONSTRAINT)
    /// `SQLITE_MISMATCH`: a value of the wrong type (a Codable column that does not convert).
    public static let mismatch = FMResultCode(rawValue: SQLITE_MISMATCH)
    /// `SQLITE_MISUSE`: the library was used wrongly (a refused key, a closed database, a bad argument).
    public static let misuse = FMResultCode(rawValue: SQLITE_MISUSE)
    /// `SQLITE_AUTH`: the library's guard refused a statement (a key PRAGMA on a keyed connection).
    public static let authorization = FMResultCode(rawValue: SQLITE_AUTH)
    /// `SQLITE_FORMAT`: a SQLCipher 4 file on SQLCipher 3, with the right key.
    public static let format = FMResultCode(rawValue: SQLITE_FORMAT)
    /// `SQLITE_RANGE`: a bind index out of range.
    public static let range = FMResultCode(rawValue: SQLITE_RANGE)
    /// `SQLITE_NOTADB`: a wrong key, or not a database.
    public static let notADatabase = FMResultCode(rawValue: SQLITE_NOTADB)

    /// Whether `code` is `pattern` (or, for a primary pattern, one of its extended codes).
    public static func ~= (pattern: FMResultCode, code: FMResultCode) -> Bool {
        pattern.rawValue == code.rawValue || (pattern.rawValue == pattern.primary.rawValue && pattern == code.primary)
    }

    /// Whether `error` is a library error whose code matches `pattern`: `catch FMResultCode.busy`.
    public static func ~= (pattern: FMResultCode, error: any Error) -> Bool {
        guard let code = FMResultCode(error) else { return false }
        return pattern ~= code
    }

    /// The code of a library error (an ``FMDatabaseError``, or an `NSError` in its domain); nil for others.
    public init?(_ error: any Error) {
        if let error = error as? FMDatabaseError {
            self.init(rawValue: error.extendedCode)
            return
        }
        let ns = error as NSError
        guard ns.domain == FMDatabaseError.domain else { return nil }
        let extended = (ns.userInfo["extendedCode"] as? Int).flatMap { Int32(exactly: $0) }
        self.init(rawValue: extended ?? Int32(truncatingIfNeeded: ns.code))
    }
}

extension FMDatabaseError {
    /// The error's code as an ``FMResultCode``, for `switch` and `~=`.
    public var resultCodeValue: FMResultCode { FMResultCode(rawValue: extendedCode) }

    /// Whether the error's code matches one of `codes` (`~=`: a primary code matches its extended codes),
    /// where a `catch` clause also needs the error: `catch let error as FMDatabaseError where
    /// error.hasCode(.busy, .locked)`.
    func hasCode(_ codes: FMResultCode...) -> Bool {
        codes.contains { $0 ~= resultCodeValue }
    }
}
