import Foundation

/// Keys from systemd credentials: a service started with `LoadCredentialEncrypted=NAME:...` (or
/// `LoadCredential=`, `SetCredentialEncrypted=`) finds the decrypted secret in
/// `$CREDENTIALS_DIRECTORY/NAME`, a file on a non-swappable in-memory file system readable only by the
/// service. This provider reads it once, at init, into wiped memory, and uses it as `usage` says.
///
/// ```swift
/// // app.service:  LoadCredentialEncrypted=app-db-key:/etc/credstore.encrypted/app-db-key
/// let provider = try SystemdCredentialKeyProvider(credential: "app-db-key", usage: .keySlot(.rawKey))
/// let pool = try FMDatabasePool(path: "/var/lib/app/app.db", keyProvider: provider)
/// ```
///
/// Refused with a clear `FMDatabaseError`: `CREDENTIALS_DIRECTORY` not set (SQLITE_CANTOPEN: the
/// process was not started by systemd with a credential), a name with "/" (SQLITE_MISUSE), a missing
/// or unreadable file, a symbolic link or anything but a regular file (SQLITE_CANTOPEN; a FIFO is never
/// waited on), a file group or others may read or write, or in a directory group or others may write
/// (SQLITE_PERM: systemd makes them 0400/0440 to the service only, in a read-only directory), an empty
/// file or one over 64 KiB.
///
/// Related systemd documentation: <https://systemd.io/CREDENTIALS/>
public final class SystemdCredentialKeyProvider: KeyProvider {
    /// What the credential holds.
    public enum Usage: Sendable {
        /// A passphrase for SQLCipher's own KDF (as `PassphraseKeyProvider`).
        case passphrase
        /// The database's raw key: 32 bytes or 64 hexadecimal digits (as `RawKeyProvider`).
        case rawKey
        /// A secret that opens a key slot of the database (as `KeySlotKeyProvider`).
        case keySlot(KeySlotKind)
    }

    /// The largest credential accepted.
    public static let maximumSize = 64 * 1024

    private let provider: any KeyProvider

    /// Reads `$CREDENTIALS_DIRECTORY/<credential>` now.
    /// - Parameters:
    ///   - credential: the credential's name (as in `LoadCredentialEncrypted=NAME:...`).
    ///   - usage: what the credential holds.
    ///   - environment: where `CREDENTIALS_DIRECTORY` is looked up (default: this process's).
    /// - Throws: `FMDatabaseError` as listed above.
    public init(
        credential: String, usage: Usage, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let material = try Self.read(credential: credential, environment: environment)
        switch usage {
        case .passphrase:
            provider = PassphraseKeyProvider(material: material.trimmingTrailingNewline())
        case .rawKey:
            provider = try RawKeyProvider(
                material: material.count == 32 ? material : material.trimmingTrailingNewline())
        case .keySlot(.passphrase):
            provider = KeySlotKeyProvider(secret: .passphrase(material: material.trimmingTrailingNewline()))
        case .keySlot(.rawKey):
            provider = KeySlotKeyProvider(
                secret: try .rawKey(material: material.count == 32 ? material : material.trimmingTrailingNewline()))
        case .keySlot(.recoveryKey):
            provider = KeySlotKeyProvider(secret: try .recoveryKey(material: material))
        }
    }

    /// The key for `request` (see `KeyProvider`).
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        try provider.key(for: request)
    }

    /// What the provider the credential made answers (see ``KeyProvider/requiresExistingDatabase``): true
    /// for `.keySlot`, whose database is made by `KeySlots.createDatabase` or `fmdb-cipher keys init`.
    public var requiresExistingDatabase: Bool { provider.requiresExistingDatabase }

    /// What the provider the credential made answers (see ``KeyProvider/cipherSettings``).
    public var cipherSettings: CipherSettings? { provider.cipherSettings }

    /// Passes the request on to the provider the credential made: a key slot provider reads its slot file
    /// again (see ``KeyProvider/reloadKey()``). The credential itself is not read again: systemd writes it
    /// when the service starts and not again at `systemctl reload`, so a new credential value reaches the
    /// service at its next start. For a key that changes while the service runs, read it from a file.
    public func reloadKey() throws {
        try provider.reloadKey()
    }

    /// The credential's bytes, in wiped memory, with the checks listed above.
    ///
    /// No error names the credential (nor its path): a name is sometimes the secret itself, given by
    /// mistake (`--key-credential "$SECRET"`), and errors reach logs.
    ///
    /// ```swift
    /// let material = try SystemdCredentialKeyProvider.read(credential: "app-db-key")
    /// ```
    public static func read(
        credential name: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> KeyMaterial {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw FMDatabaseError.misuse(
                "A credential name is a file name: not empty, not \".\" or \"..\", no \"/\" (the name given is not "
                    + "shown)."
            )
        }
        guard let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN,
                message: "CREDENTIALS_DIRECTORY is not set: credentials are only available to a service "
                    + "started by systemd with LoadCredential=/LoadCredentialEncrypted=NAME:..."
            )
        }
        let path = directory + "/" + name
        // O_NONBLOCK: a FIFO there is opened at once and refused by the type check below, never waited on.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            let reason =
                errno == ENOENT
                ? "it does not exist (is LoadCredentialEncrypted=NAME:... in the unit?)"
                : errno == ELOOP ? "it is a symbolic link" : String(cString: strerror(errno))
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN, message: "Cannot read the credential given (in \(directory)): \(reason).")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN, message: "The credential given (in \(directory)) is not a regular file.")
        }
        guard info.st_mode & 0o066 == 0 else {
            throw FMDatabaseError(
                code: SQLITE_PERM,
                message:
                    "The credential given (in \(directory)) is readable or writable by group or others (mode "
                    + "\(String(info.st_mode & 0o777, radix: 8))): refused; systemd makes credentials readable by the "
                    + "service only."
            )
        }
        var folder = stat()
        guard stat(directory, &folder) == 0, folder.st_mode & 0o022 == 0 else {
            throw FMDatabaseError(
                code: SQLITE_PERM,
                message:
                    "The directory CREDENTIALS_DIRECTORY names (\(directory)) is writable by group or others (mode "
                    + "\(String(folder.st_mode & 0o777, radix: 8))): refused, as anyone who can write there can "
                    + "replace the credential; systemd makes it read-only to the service."
            )
        }
        let material = try KeyMaterial(capacity: maximumSize + 1) { buffer in
            var total = 0
            while total < buffer.count {
                let n = Foundation.read(fd, buffer.baseAddress?.advanced(by: total), buffer.count - total)
                if n < 0 {
                    if errno == EINTR { continue }
                    return -1
                }
                if n == 0 { break }
                total += n
            }
            return total
        }
        guard material.count <= maximumSize else {
            throw FMDatabaseError.misuse("The credential given (in \(directory)) is larger than \(maximumSize) bytes.")
        }
        guard !material.isEmpty else {
            throw FMDatabaseError.misuse("The credential given (in \(directory)) is empty.")
        }
        return material
    }
}
