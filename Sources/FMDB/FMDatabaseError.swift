import CSQLCipher
import Foundation

/// The one error type of the library.
///
/// Every error the library throws, and every error `FMDatabase.lastError()` returns, is an
/// `FMDatabaseError`. It bridges to `NSError` with domain `"FMDatabase"`, `code` = SQLite's primary
/// result code and `localizedDescription` = SQLite's message (or the library's own, for misuse).
///
/// ```swift
/// do {
///     try db.executeUpdate("INSERT INTO missing VALUES (?)", values: [1])
/// } catch let error as NSError {
///     print(error.domain, error.code)   // FMDatabase 1
/// }
/// ```
///
/// Descriptions never contain bound values or key bytes; they may contain SQL text, which
/// never contains a key (keys reach SQLCipher through `sqlite3_key_v2`, not SQL).
///
/// Related SQLite documentation: <https://www.sqlite.org/rescode.html>
public struct FMDatabaseError: Error, CustomNSError, CustomStringConvertible, Sendable, Equatable {
    /// The primary result code (`extendedCode & 0xFF`), e.g. 26 for `SQLITE_NOTADB`.
    public let code: Int32
    /// The extended result code, e.g. 1555 for `SQLITE_CONSTRAINT_PRIMARYKEY`.
    public let extendedCode: Int32
    /// SQLite's message, or the library's own for misuse.
    public let message: String
    /// The SQL that failed, when there is one.
    public let sql: String?

    /// Creates an error from a result code and a message.
    public init(code: Int32, message: String? = nil, sql: String? = nil) {
        self.extendedCode = code
        self.code = code & 0xFF
        self.message = message ?? FMDatabaseError.defaultMessage(for: code)
        self.sql = sql
    }

    /// SQLite's own English text for a result code.
    static func defaultMessage(for code: Int32) -> String {
        guard let text = sqlite3_errstr(code) else { return "unknown error (\(code))" }
        return String(cString: text)
    }

    public static var errorDomain: String { "FMDatabase" }
    public var errorCode: Int { Int(code) }
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let sql { info["sql"] = sql }
        info["extendedCode"] = Int(extendedCode)
        return info
    }

    public var description: String {
        var text = "SQLite error \(code): \(message)"
        if let sql { text += " - while executing `\(sql)`" }
        return text
    }

    public var localizedDescription: String { message }

    // MARK: - Library errors

    static func misuse(_ message: String, sql: String? = nil) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISUSE, message: message, sql: sql)
    }

    static func closed(sql: String? = nil) -> FMDatabaseError {
        FMDatabaseError(code: SQLITE_MISUSE, message: "The FMDatabase is not open.", sql: sql)
    }

    static func bindCount(expected: Int32, got: Int, sql: String) -> FMDatabaseError {
        FMDatabaseError(
            code: SQLITE_RANGE,
            message: "Error: the bind count (\(got)) is not correct for the # of variables in the query (\(expected))",
            sql: sql
        )
    }
}
