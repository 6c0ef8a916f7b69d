import ArgumentParser
import FMDB
import Foundation

/// How a passphrase or key becomes a KeyProvider (`--kdf`).
enum KDF: String, ExpressibleByArgument, CaseIterable {
    /// SQLCipher's own KDF at every open: files open in the sqlcipher shell with PRAGMA key = '...'.
    case passphrase
    /// The same key as `passphrase`, derived once with OpenSSL (PBKDF2-SHA1 x 64,000).
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    /// PBKDF2-HMAC-SHA512 x 256,000 over the file's salt.
    case pbkdf2
    /// scrypt N=2^15 r=8 p=1 over the file's salt.
    case scrypt
    /// A 32-byte key, or 64 hex digits (96 with the file's salt), bare or as `x'…'`: no KDF.
    case raw
    /// A passphrase that opens a key slot (`keys`): the data key is unwrapped from `DB-keyslots`.
    case slot
    /// A raw key (32 bytes or 64 hex digits) that opens a key slot.
    case slotRaw = "slot-raw"
    /// A recovery key that opens a key slot.
    case slotRecovery = "slot-recovery"

    /// Whether the key opens a key slot (the database has a slot file).
    var opensSlot: Bool { self == .slot || self == .slotRaw || self == .slotRecovery }

    /// The key of a single-key copy made with a slot kind's key: a passphrase, or a raw key for slot-raw.
    var singleKey: KDF {
        switch self {
        case .slot, .slotRecovery: return .passphrase
        case .slotRaw: return .raw
        default: return self
        }
    }

    func provider(_ material: KeyMaterial) throws -> any KeyProvider {
        WrongKeyHint.note(material, usedWith: self)
        switch self {
        case .passphrase: return PassphraseKeyProvider(material: material)
        case .pbkdf2Sqlcipher: return PBKDF2KeyProvider.sqlcipherCompatible(material: material)
        case .pbkdf2: return PBKDF2KeyProvider(material: material)
        case .scrypt: return ScryptKeyProvider(material: material)
        case .raw: return try KDF.rawKey { try RawKeyProvider(material: material) }
        case .slot, .slotRaw, .slotRecovery:
            return KeySlotKeyProvider(secret: try slotSecret(material), logsRefusals: false)
        }
    }
}

extension KDF {
    /// `body` with a malformed raw key as a usage error (exit 64) in the tool's style, saying what a raw key
    /// is; the key itself is never repeated.
    static func rawKey<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as FMDatabaseError where FMResultCode.misuse ~= error {
            let message = error.message.prefix(1).lowercased() + error.message.dropFirst()
            throw CLIError.usage("the key is not a raw key: " + message.trimmingCharacters(in: ["."]))
        }
    }
}
