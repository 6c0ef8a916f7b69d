import ArgumentParser
import FMDB
import Foundation

/// Options every slot change shares: the database and the key that unlocks one of its slots.
struct SlotDatabaseOptions: ParsableArguments {
    @Argument(help: "The slotted database.") var database: String
    @OptionGroup var key: SlotKeyOptions

    /// The unlocking secret: --kdf raw/slot-raw, slot-recovery, or a passphrase.
    func unlockingSecret(_ reader: KeyReader) throws -> KeySlotSecret {
        _ = try DatabaseFiles.requireInput(database)
        let material = try reader.read(key.source, what: "key of a slot of \(database)")
        return try key.kdf(opening: database, with: material).slotSecret(material)
    }
}
