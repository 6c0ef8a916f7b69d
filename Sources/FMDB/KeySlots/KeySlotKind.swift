import Foundation

/// What kind of secret a key slot is opened with.
public enum KeySlotKind: String, Sendable, CaseIterable {
    /// A passphrase, stretched with scrypt or PBKDF2-HMAC-SHA512 (parameters stored in the slot).
    case passphrase
    /// A 32-byte raw key (or 64 hexadecimal digits), e.g. from a secrets manager or a systemd credential.
    case rawKey = "raw"
    /// A generated recovery key, shown once (`KeySlots.addRecoverySlot`).
    case recoveryKey = "recovery"
}
