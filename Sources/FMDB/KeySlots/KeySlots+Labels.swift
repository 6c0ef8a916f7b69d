import Foundation

extension KeySlots {
    /// The slots of the database at `databasePath`: ids, kinds, creation times and KDFs — no secrets.
    /// Needs no key; only the slot file's shape is checked.
    ///
    /// The labelled spelling of ``list(_:)``, matching ``slotFilePath(forDatabaseAt:)``.
    ///
    /// ```swift
    /// for slot in try KeySlots.list(forDatabaseAt: path) { print(slot) }
    /// ```
    ///
    /// - Parameter databasePath: The database file (its slot file is `databasePath + "-keyslots"`).
    /// - Returns: The slots, in the file's order.
    /// - Throws: ``FMDatabaseError`` (SQLITE_CANTOPEN missing, SQLITE_CORRUPT damaged).
    public static func list(forDatabaseAt databasePath: String) throws -> [KeySlotInfo] {
        try list(databasePath)
    }
}
