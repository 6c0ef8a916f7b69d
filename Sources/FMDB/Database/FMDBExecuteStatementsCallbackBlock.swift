/// The callback of `executeStatements(_:withResultBlock:)`: one call per row, column name to
/// value (`String`, or `NSNull` for NULL). Return 0 to go on, anything else to stop.
public typealias FMDBExecuteStatementsCallbackBlock = ([AnyHashable: Any]) -> Int32
