import Foundation

/// The kinds of transaction (`BEGIN DEFERRED / IMMEDIATE / EXCLUSIVE`).
///
/// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
public enum FMDBTransactionKind: Sendable {
    case deferred, immediate, exclusive

    var beginSQL: String {
        switch self {
        case .deferred: return "begin deferred transaction"
        case .immediate: return "begin immediate transaction"
        case .exclusive: return "begin exclusive transaction"
        }
    }
}
