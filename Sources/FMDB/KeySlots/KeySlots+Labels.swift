import Foundation

extension KeySlots {
    /// The slots of the database at `path`; the unlabelled spelling, kept for source compatibility.
    ///
    /// Use ``list(forDatabaseAt:)``, labelled like the other `KeySlots` calls.
    @available(*, deprecated, renamed: "list(forDatabaseAt:)")
    public static func list(_ path: String) throws -> [KeySlotInfo] {
        try list(forDatabaseAt: path)
    }
}
