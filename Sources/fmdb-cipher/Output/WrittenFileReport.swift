import Foundation

/// The `--json` object of a command that wrote a database file (`encrypt`, `export`, `migrate`, `rekey`): what
/// opens it. `kdf_iter` and `key_slots` are null when they do not apply; `recovery_slot` is there only with a
/// recovery key (which `Output.json(_:secretMember:secret:)` writes after it, from wiped memory).
struct WrittenFileReport: Encodable {
    let path: String
    /// The flags besides the key that open the file, `[]` for none.
    let openWith: [String]
    /// The `--kdf` that opens it, as the option spells it.
    let kdf: String
    /// 3 or 4.
    let format: Int
    let cipherPageSize: Int
    /// SQLCipher's iterations, for a passphrase it derives itself; else nil (null).
    let kdfIter: Int?
    /// The slot file's path, for a slotted database; else nil (null).
    let keySlots: String?
    var recoverySlot: Int?

    enum CodingKeys: String, CodingKey {
        case path, kdf, format
        case openWith = "open_with"
        case cipherPageSize = "cipher_page_size"
        case kdfIter = "kdf_iter"
        case keySlots = "key_slots"
        case recoverySlot = "recovery_slot"
    }

    /// Writes null for a `kdf_iter` or `key_slots` that does not apply (the synthesized form would leave them
    /// out), and `recovery_slot` only when there is one.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(openWith, forKey: .openWith)
        try container.encode(kdf, forKey: .kdf)
        try container.encode(format, forKey: .format)
        try container.encode(cipherPageSize, forKey: .cipherPageSize)
        try container.encode(kdfIter, forKey: .kdfIter)
        try container.encode(keySlots, forKey: .keySlots)
        try container.encodeIfPresent(recoverySlot, forKey: .recoverySlot)
    }
}
