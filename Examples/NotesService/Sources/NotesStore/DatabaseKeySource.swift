import FMDB
import Foundation

/// What the service's key opens: the database itself, or a key slot of a slotted database (`fmdb-cipher keys
/// init --kdf slot-raw`), whose secret an operator changes (`keys change`) without re-encrypting anything.
/// Either is 32 raw bytes or 64 hexadecimal digits.
public enum DatabaseKeyKind: String, Sendable {
    /// The database's raw key (`NOTES_KEY_KIND=raw`, the default).
    case rawKey = "raw"
    /// The raw-key secret of a key slot (`NOTES_KEY_KIND=slot-raw`).
    case slotRawKey = "slot-raw"
}

/// Where the service reads its database key, never from the command line or the environment's values (`ps`
/// and `/proc/PID/environ` show both).
public enum DatabaseKeySource: Sendable {
    /// A file only the service's user may read (0600 or 0400). The pool reads it again by itself whenever it
    /// finds the database under another key (an operator's plain `fmdb-cipher rekey` after writing the new key
    /// here), and at each reload.
    case file(path: String)
    /// A systemd credential, `$CREDENTIALS_DIRECTORY/NAME` (`LoadCredential=NAME:...`): a fixed key that
    /// systemd writes when it starts the service and not again until a restart. A reload reads it again.
    case credential(name: String)

    /// The source the environment names: `NOTES_KEY_FILE`, else the credential `NOTES_KEY_CREDENTIAL`
    /// (default `notes-db-key`) when systemd set `CREDENTIALS_DIRECTORY`; nil when neither is there.
    public init?(environment: [String: String]) {
        if let path = environment["NOTES_KEY_FILE"], !path.isEmpty {
            self = .file(path: path)
        } else if environment["CREDENTIALS_DIRECTORY"] != nil {
            self = .credential(name: environment["NOTES_KEY_CREDENTIAL"] ?? "notes-db-key")
        } else {
            return nil
        }
    }

    /// A provider for the key the source holds now. (The database service wraps a key file's in a
    /// `ReloadableKeyProvider`, so that the pool reads the file again when it meets the database under another
    /// key: `readsKeySourceOnKeyChange`.)
    public func makeKeyProvider(
        kind: DatabaseKeyKind = .rawKey, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> any KeyProvider {
        switch (self, kind) {
        case (.file(let path), .rawKey):
            return try RawKeyProvider(
                material: KeyMaterial.read(from: .file(path: path), describedAs: "database key"))
        case (.file(let path), .slotRawKey):
            let secret = try KeyMaterial.read(from: .file(path: path), describedAs: "key slot secret")
            return KeySlotKeyProvider(secret: try .rawKey(material: secret))
        case (.credential(let name), .rawKey):
            return try SystemdCredentialKeyProvider(credential: name, usage: .rawKey, environment: environment)
        case (.credential(let name), .slotRawKey):
            return try SystemdCredentialKeyProvider(
                credential: name, usage: .keySlot(.rawKey), environment: environment)
        }
    }

    /// Whether reading the source again can find a new key while the service runs: a key file can; a
    /// credential cannot (systemd writes it at start only).
    var changesWhileRunning: Bool {
        if case .file = self { return true }
        return false
    }
}
