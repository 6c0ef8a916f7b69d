import FMDB
import Foundation

/// What a file needs said to open it that the file itself does not record. SQLCipher keeps no settings in
/// the file: the page size, SQLCipher's KDF iterations and how the key was turned into a key (`--kdf`) are
/// needed again at every open, and a wrong one reads as a wrong key. The tool says them back whenever it
/// writes a file whose settings differ from its format's defaults (a note on standard error with the exact
/// flags; with `--json`, one object on standard output whose `open_with` holds them), and `info` says the ones
/// it opened a file with. A slotted database needs no `--kdf` (its slots are
/// found through the slot file beside it), but its slot file does not record a non-default page size.
enum OpeningFlags {
    /// The default cipher page size of `format`: 4096 for SQLCipher 4, 1024 for the older formats.
    static func defaultPageSize(_ format: CipherFormat) -> Int { format == .v4 ? 4096 : 1024 }

    /// The flags, besides the key, that open a file of `format` keyed with `kdf`, whose cipher page size is
    /// `pageSize` and (a passphrase SQLCipher derives itself) whose KDF iterations are `iterations`.
    static func needed(kdf: KDF, format: CipherFormat, pageSize: Int?, iterations: Int?) -> [String] {
        var flags: [String] = []
        if !kdf.opensSlot, kdf != .passphrase { flags += ["--kdf", kdf.rawValue] }
        if let pageSize, pageSize != defaultPageSize(format) { flags += ["--cipher-page-size", String(pageSize)] }
        if kdf == .passphrase, let iterations, iterations != format.kdfIterations {
            flags += ["--kdf-iter", String(iterations)]
        }
        return flags
    }

    /// The flags that open a new file written with `kdf` and `settings` (nil format: the linked default),
    /// the app-chosen settings included (`--cipher-hmac-algorithm`, `--cipher-plaintext-header-size`, ...).
    static func needed(kdf: KDF, settings: CipherSettings) -> [String] {
        needed(
            kdf: kdf, format: settings.format ?? .linkedDefault, pageSize: settings.pageSize,
            iterations: settings.kdfIterations) + choices(settings)
    }

    /// The `--cipher-…` flags of the settings an app chose. The salt is said as given on the command line
    /// (`--new-cipher-salt`): a file with a plaintext header does not open without it.
    static func choices(_ settings: CipherSettings) -> [String] {
        var flags: [String] = []
        if let algorithm = settings.hmacAlgorithm { flags += ["--cipher-hmac-algorithm", algorithm.rawValue] }
        if let algorithm = settings.kdfAlgorithm { flags += ["--cipher-kdf-algorithm", algorithm.rawValue] }
        if let usesHMAC = settings.usesHMAC, !usesHMAC { flags += ["--cipher-use-hmac", "off"] }
        if let size = settings.plaintextHeaderSize, size > 0 {
            flags += ["--cipher-plaintext-header-size", String(size)]
        }
        if let salt = settings.salt { flags += ["--cipher-salt", salt.map { String(format: "%02x", $0) }.joined()] }
        return flags
    }

    /// Says on standard error which flags open `path`, when it needs any beyond the key.
    static func note(_ path: String, kdf: KDF, settings: CipherSettings) {
        Written(path: path, kdf: kdf, settings: settings).note()
    }

    /// A file a command wrote (`encrypt`, `export`, `migrate`, `rekey`, `sql --create`), said back: a note on
    /// standard error when it needs flags besides the key, and with `--json` one object on standard output.
    struct Written {
        let path: String
        let kdf: KDF
        let settings: CipherSettings

        var format: CipherFormat { settings.format ?? .linkedDefault }
        var flags: [String] { OpeningFlags.needed(kdf: kdf, settings: settings) }

        /// The note on standard error, when the file needs flags besides the key.
        func note() {
            guard !flags.isEmpty else { return }
            Output.message(
                "fmdb-cipher: note: \(path) needs these settings at every open (the file does not record them): "
                    + flags.joined(separator: " "))
        }

        /// The `--json` object (`WrittenFileReport`): `path`, `open_with` (the flags besides the key, `[]` for
        /// none), `kdf` (as `--kdf` spells it), `format` (3 or 4), `cipher_page_size`, `kdf_iter` (SQLCipher's
        /// iterations for a passphrase it derives itself, else null) and `key_slots` (the slot file's path, or
        /// null).
        var object: WrittenFileReport {
            WrittenFileReport(
                path: path, openWith: flags, kdf: kdf.rawValue, format: format.rawValue,
                cipherPageSize: settings.pageSize ?? OpeningFlags.defaultPageSize(format),
                kdfIter: kdf == .passphrase ? (settings.kdfIterations ?? format.kdfIterations) : nil,
                keySlots: kdf.opensSlot ? KeySlots.slotFilePath(forDatabaseAt: path) : nil)
        }

        /// What a command that wrote the file says: the note of the flags that open it, then the `--json`
        /// object (`json`) or the recovery key (shown once, on standard output).
        func report(json: Bool, recovery: (key: RecoveryKey, slot: KeySlotInfo)?) throws {
            note()
            if json {
                if let recovery {
                    Output.message(
                        "Recovery key for slot \(recovery.slot.id): in the JSON object (recovery_key). It is shown "
                            + "only this once: keep it offline, and the JSON output with it.")
                }
                try printJSON(recovery: recovery)
            } else if let recovery {
                SlotChange.printRecoveryKey(recovery.key, slot: recovery.slot)
            }
        }

        /// Prints the `--json` object; with a recovery key, it is in the object as `recovery_key` (and its slot
        /// `recovery_slot`), written to standard output straight from the key's wiped memory.
        func printJSON(recovery: (key: RecoveryKey, slot: KeySlotInfo)? = nil) throws {
            guard let recovery else {
                try Output.json(object)
                return
            }
            var object = self.object
            object.recoverySlot = recovery.slot.id
            try Output.json(object, secretMember: "recovery_key") { write in
                recovery.key.withFormattedText { write($0, "the recovery key") }
            }
        }
    }

    /// The key derivation a file opened with `kdf` actually went through.
    static func derivation(_ kdf: KDF, format: CipherFormat, iterations: Int?) -> String {
        let digest = format == .v4 ? "SHA512" : "SHA1"
        switch kdf {
        case .passphrase:
            return "PBKDF2-HMAC-\(digest) x \(iterations ?? format.kdfIterations), by SQLCipher at every open"
        case .pbkdf2Sqlcipher:
            return "PBKDF2-HMAC-\(digest) x \(format.kdfIterations) (what PRAGMA key derives for \(format)), "
                + "derived by fmdb-cipher; a raw key to SQLCipher"
        case .pbkdf2: return "PBKDF2-HMAC-SHA512 x 256000, derived by fmdb-cipher; a raw key to SQLCipher"
        case .scrypt: return "scrypt N=2^15 r=8 p=1, derived by fmdb-cipher; a raw key to SQLCipher"
        case .raw: return "none: a raw 256-bit key"
        case .slot, .slotRaw, .slotRecovery: return "none: the raw data key, unwrapped from a key slot"
        }
    }
}
