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
