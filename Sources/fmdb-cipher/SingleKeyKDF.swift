import ArgumentParser

/// The kinds of key a file rewritten under a new key can have (`rekey --new-kdf`, `export --new-kdf`): one key,
/// or, for a copy (`export --new-kdf slot|slot-raw`), key slots with a new random data key, the new key their
/// first slot. `rekey` refuses the slot kinds (a file rewritten in place keeps its salt, which a new slot
/// file must be made for); a slotted source's copy keeps its slots when given no `--new-key-*` and no
/// `--new-kdf`; `rekey --data-key` rotates a slotted database's key.
enum SingleKeyKDF: String, ExpressibleByArgument, CaseIterable {
    case passphrase
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    case pbkdf2
    case scrypt
    case raw
    case slot
    case slotRaw = "slot-raw"

    var kdf: KDF {
        switch self {
        case .passphrase: return .passphrase
        case .pbkdf2Sqlcipher: return .pbkdf2Sqlcipher
        case .pbkdf2: return .pbkdf2
        case .scrypt: return .scrypt
        case .raw: return .raw
        case .slot: return .slot
        case .slotRaw: return .slotRaw
        }
    }
}
