import ArgumentParser

/// The kinds of key a file rewritten under a new key can have (`rekey --new-kdf`, `export --new-kdf`): one key,
/// no slots. A slot kind is not one of them: a copy or a rekey under a new key has no key slots (a slotted
/// source's copy keeps its slots when given no `--new-key-*` and no `--new-kdf`; `rekey --data-key` rotates a
/// slotted database's key).
enum SingleKeyKDF: String, ExpressibleByArgument, CaseIterable {
    case passphrase
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    case pbkdf2
    case scrypt
    case raw

    var kdf: KDF {
        switch self {
        case .passphrase: return .passphrase
        case .pbkdf2Sqlcipher: return .pbkdf2Sqlcipher
        case .pbkdf2: return .pbkdf2
        case .scrypt: return .scrypt
        case .raw: return .raw
        }
    }
}

/// The kinds of key a copy can be written under (`export --new-kdf`): one key, as `SingleKeyKDF`, or key slots
/// (`slot`, `slot-raw`): a new random data key whose first slot is the new key, and no plaintext on disk.
enum CopyKDF: String, ExpressibleByArgument, CaseIterable {
    case passphrase
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    case pbkdf2
    case scrypt
    case raw
    case slot
    case slotRaw = "slot-raw"

    var kdf: KDF {
        switch self {
        case .slot: return .slot
        case .slotRaw: return .slotRaw
        case .passphrase, .pbkdf2Sqlcipher, .pbkdf2, .scrypt, .raw:
            return SingleKeyKDF(rawValue: rawValue)?.kdf ?? .passphrase
        }
    }
}
