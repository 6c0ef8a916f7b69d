import Foundation

extension FMDatabase {
    /// A formatter for storing dates as text: `format`, en_US_POSIX, GMT (as FMDB).
    ///
    /// ```swift
    /// db.setDateFormat(FMDatabase.storeableDateFormat("yyyy-MM-dd HH:mm:ss"))
    /// ```
    public static func storeableDateFormat(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.dateFormat = format
        formatter.timeZone = TimeZone(secondsFromGMT: 0)
        formatter.locale = Locale(identifier: "en_US_POSIX")
        return formatter
    }

    /// Whether a date formatter is set (dates then bind and read as formatted text).
    @discardableResult
    public func hasDateFormatter() -> Bool { dateFormatter != nil }

    /// Dates bind as text in this format (and are read back with it); nil: seconds since 1970.
    public func setDateFormat(_ format: DateFormatter?) {
        dateFormatter = format
    }

    /// Parses `string` with the date formatter; nil without one.
    @discardableResult
    public func date(from string: String) -> Date? {
        dateFormatter?.date(from: string)
    }

    /// Formats `date` with the date formatter; nil without one.
    @discardableResult
    public func string(from date: Date) -> String? {
        dateFormatter?.string(from: date)
    }
}
