import FMDB
import Foundation

/// What the tool noticed about the keys it was given, said beside a wrong key (exit 65): a key of 64
/// hexadecimal digits taken as a passphrase is most likely a raw key given without `--kdf raw`. Only that
/// it was noticed is kept, never the key.
enum WrongKeyHint {
    /// The `--kdf` a key of 64 hexadecimal digits was taken with as a passphrase (nil: none was).
    private nonisolated(unsafe) static var hexKeyTakenWith: KDF?
    private static let lock = NSLock()

    /// `material` is about to be used with `kdf`: notes a raw-looking key taken as a passphrase.
    static func note(_ material: KeyMaterial, usedWith kdf: KDF) {
        guard [.passphrase, .pbkdf2Sqlcipher, .pbkdf2, .scrypt, .slot].contains(kdf), material.count == 64,
            (try? RawKeyProvider(material: material)) != nil
        else { return }
        lock.lock()
        defer { lock.unlock() }
        hexKeyTakenWith = kdf
    }

    /// The hint to add to a wrong-key message, if any.
    static var text: String? {
        lock.lock()
        defer { lock.unlock() }
        switch hexKeyTakenWith {
        case nil: return nil
        case .slot?:
            return "the key given is 64 hexadecimal digits, taken as a slot's passphrase: if it is a raw-key "
                + "slot's key, give --kdf slot-raw"
        case _?:
            return "the key given is 64 hexadecimal digits, taken as a passphrase: if it is a raw key, give --kdf raw"
        }
    }
}
