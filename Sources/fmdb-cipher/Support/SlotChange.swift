import ArgumentParser
import FMDB
import Foundation

/// What the slot changes share (`keys` commands, `encrypt --kdf slot`, `export` into slots, `rekey --data-key`):
/// the new slot's secret and its length warning, the library's warnings on standard error, how a message names a
/// slot, and the recovery key shown once.
enum SlotChange {
    /// Reads the secret of a new slot (asked twice on a terminal): raw with --new-kdf slot-raw, else a passphrase.
    static func newSecret(_ options: NewSlotKeyOptions, reader: KeyReader, database: String) throws -> KeySlotSecret {
        let material = try reader.read(
            options.source, what: "new slot key for \(database)", confirm: true, newKey: true)
        let secret = try options.kdf.slotSecret(material)
        if secret.slotKind == .passphrase { warnIfShort(material) }
        return secret
    }

    /// The shortest passphrase a new slot gets without a warning, in bytes of UTF-8 (12 ASCII characters).
    static let minimumPassphraseLength = 12

    /// Warns (never refuses) when a new passphrase slot's passphrase is shorter than the documented minimum:
    /// the slot's KDF slows each guess, not the number of guesses a short passphrase leaves.
    static func warnIfShort(_ material: KeyMaterial) {
        guard material.count < minimumPassphraseLength else { return }
        Output.message(
            "fmdb-cipher: warning: the new passphrase is shorter than \(minimumPassphraseLength) characters: "
                + "a short passphrase is guessed quickly whatever the slot's KDF; prefer a long one (or a raw key)")
    }

    /// Runs a slot change with the library's warnings printed on standard error: a change that took but may not
    /// survive a power loss (its directory could not be synced), a rotation whose slot file stays pending.
    static func reportingWarnings<T>(_ body: () throws -> T) rethrows -> T {
        try KeySlots.withWarningReceiver({ Output.message("fmdb-cipher: warning: \($0)") }, operation: body)
    }

    /// How a message names a slot: its id, kind and KDF.
    static func describe(_ slot: KeySlotInfo) -> String {
        "slot \(slot.id) (\(slot.kind.rawValue), \(slot.kdf))"
    }

    /// Writes a recovery key to standard output straight from wiped memory.
    static func printRecoveryKey(_ key: RecoveryKey, slot: KeySlotInfo) {
        Output.message(
            "Recovery key for slot \(slot.id). It is shown only this once: write it down and keep it offline.")
        key.withFormattedText { text in
            Output.secretLine(text, what: "the recovery key")
        }
    }
}
