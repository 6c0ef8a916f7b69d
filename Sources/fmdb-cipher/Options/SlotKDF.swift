import ArgumentParser
import FMDB
import Foundation

/// The KDF of new passphrase slots.
enum SlotKDF: String, ExpressibleByArgument, CaseIterable {
    /// scrypt N=2^15 r=8 p=1 (the default).
    case scrypt
    /// PBKDF2-HMAC-SHA512 x 256,000.
    case pbkdf2

    var kdf: KeySlotKDF {
        switch self {
        case .scrypt: return .scrypt()
        case .pbkdf2: return .pbkdf2SHA512()
        }
    }
}
