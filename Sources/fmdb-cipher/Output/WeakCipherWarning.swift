import FMDB

/// Warns (never refuses) when a command writes a new file with choices weaker than SQLCipher's default: no
/// page HMACs, or SHA1 for the page HMAC or the KDF. An app may need them to read the file; the log says so.
enum WeakCipherWarning {
    /// The warnings for a new file written with `settings`, one a line.
    static func messages(_ settings: CipherSettings, file: String) -> [String] {
        var messages: [String] = []
        let start = "fmdb-cipher: warning: \(file) is written"
        if settings.usesHMAC == false {
            messages.append(
                "\(start) without page HMACs, weaker than SQLCipher's default: pages can be altered undetected")
        }
        if settings.hmacAlgorithm == .sha1 {
            messages.append(
                "\(start) with HMAC-SHA1 pages, weaker than SQLCipher's default (HMAC-SHA512): a weaker check of "
                    + "each page")
        }
        if settings.kdfAlgorithm == .pbkdf2SHA1 {
            messages.append(
                "\(start) with PBKDF2-HMAC-SHA1, weaker than SQLCipher's default (PBKDF2-HMAC-SHA512): a "
                    + "passphrase is cheaper to guess")
        }
        return messages
    }

    /// Prints `messages(settings, file:)` on standard error.
    static func warn(_ settings: CipherSettings, file: String) {
        for message in messages(settings, file: file) { Output.message(message) }
    }
}
