import ArgumentParser
import FMDB
import Foundation

/// Whether an environment variable's name may be repeated in a message. A name with a variable's shape is
/// shown; anything else is not, since it may be the key itself given by mistake (`--key-env "$KEY"`).
enum EnvironmentName {
    /// The longest name said back; a raw key's 64 hexadecimal digits, or a 32-byte key in base32 or base64, is
    /// longer.
    static let longestShown = 32
    /// The longest name said back without a `_`: `K`, `DBKEY`. Longer single words (`PASSWORD1`, `HUNTER2`)
    /// are what a passphrase given by mistake looks like.
    static let longestWord = 5

    /// A name is said back when it has the shape environment variables are given by convention and a
    /// passphrase rarely has: upper-case letters, digits and `_`, starting with a letter or `_`, at most 32
    /// characters, with a `_` unless at most 5 characters long (`K`, `DBKEY`, `APP_DB_KEY`), and not 8 or
    /// more hexadecimal digits alone. Any lower-case letter (`hunter2`, `db_key`, base64) hides it.
    static func isShown(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        guard let first = scalars.first, scalars.count <= longestShown, isLetter(first) || first == "_",
            scalars.allSatisfy({ isLetter($0) || ("0"..."9").contains($0) || $0 == "_" })
        else { return false }
        if scalars.count >= 8, scalars.allSatisfy({ $0.properties.isASCIIHexDigit }) { return false }
        return scalars.count <= longestWord || name.contains("_")
    }

    /// An upper-case ASCII letter: the only letters a name said back may hold.
    private static func isLetter(_ scalar: Unicode.Scalar) -> Bool {
        ("A"..."Z").contains(scalar)
    }
}
