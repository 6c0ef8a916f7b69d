import Foundation

/// A secret that opens a key slot: a passphrase, a raw key or a recovery key. The bytes live in
/// storage wiped with `OPENSSL_cleanse`; `description` never shows them.
///
/// ```swift
/// let secret = KeySlotSecret.passphrase("correct horse battery staple")
/// let recovery = try KeySlotSecret.recoveryKey("7K2M-Q9XD-...")   // checked as it is parsed
/// ```
public struct KeySlotSecret: Sendable, CustomStringConvertible {
    let kind: KeySlotKind
    let bytes: SecureBytes

    init(kind: KeySlotKind, bytes: SecureBytes) {
        self.kind = kind
        self.bytes = bytes
    }

    /// A passphrase (UTF-8).
    public static func passphrase(_ passphrase: String) -> KeySlotSecret {
        KeySlotSecret(kind: .passphrase, bytes: SecureBytes(utf8: passphrase))
    }

    /// A passphrase held in wiped key material.
    public static func passphrase(material: KeyMaterial) -> KeySlotSecret {
        KeySlotSecret(kind: .passphrase, bytes: material.bytes)
    }

    /// A raw key: 32 bytes.
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) unless `key` is 32 bytes.
    public static func rawKey(_ key: Data) throws -> KeySlotSecret {
        try rawKey(material: KeyMaterial(bytes: SecureBytes(key)))
    }

    /// A raw key from key material: 32 bytes, or 64 hexadecimal digits.
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for any other length or a non-hex digit.
    public static func rawKey(material: KeyMaterial) throws -> KeySlotSecret {
        KeySlotSecret(kind: .rawKey, bytes: try material.rawKey())
    }

    /// A recovery key as printed (`XXXX-XXXX-...`, nine groups; case, hyphens and spaces do not matter).
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) when it is malformed or its check group shows a typo.
    public static func recoveryKey(_ text: String) throws -> KeySlotSecret {
        try recoveryKey(material: KeyMaterial(bytes: SecureBytes(utf8: text)))
    }

    /// A recovery key as typed, from wiped key material.
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) when it is malformed or its check group shows a typo.
    public static func recoveryKey(material: KeyMaterial) throws -> KeySlotSecret {
        KeySlotSecret(kind: .recoveryKey, bytes: try RecoveryKeyCode.parse(material.trimmingTrailingNewline().bytes))
    }

    /// Which kind of slot the secret opens.
    public var slotKind: KeySlotKind { kind }

    /// A description that never shows the secret.
    public var description: String { "KeySlotSecret.\(kind)(<redacted>)" }

    func validated() throws -> KeySlotSecret {
        guard !bytes.isEmpty else { throw FMDatabaseError.misuse("An empty passphrase was given.") }
        return self
    }
}
