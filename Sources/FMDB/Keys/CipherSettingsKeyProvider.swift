import Foundation

/// A key provider carrying the cipher settings its file needs (``KeyProvider/cipherSettings``): the keys
/// are the wrapped provider's; every connection a database, queue, pool or copy keys with it gets the
/// settings. Made by ``KeyProvider/withCipherSettings(_:)``.
///
/// ```swift
/// // An iOS app's database from a shared app-group container: 32-byte plaintext header, salt kept by the app.
/// let provider = try RawKeyProvider(key: key)
///     .withCipherSettings(CipherSettings(plaintextHeaderSize: 32, salt: salt))
/// let queue = try FMDatabaseQueue(path: path, keyProvider: provider)
/// ```
///
/// - Note: FMDB compatibility: FMDB has no key providers; this is an addition.
public struct CipherSettingsKeyProvider: KeyProvider {
    /// The provider whose keys this one hands out.
    public let base: any KeyProvider
    /// The settings every connection keyed with this provider gets.
    public let settings: CipherSettings

    /// `base`'s keys, with `settings` for every connection they key.
    public init(_ base: any KeyProvider, settings: CipherSettings) {
        self.base = base
        self.settings = settings
    }

    /// `base`'s key for `request` (see `KeyProvider`).
    /// - Throws: what `base` throws.
    public func key(for request: KeyRequest) throws -> DatabaseKey { try base.key(for: request) }

    /// `base` reads its source again (see ``KeyProvider/reloadKey()``).
    /// - Throws: what `base` throws.
    public func reloadKey() throws { try base.reloadKey() }

    /// What `base` answers (see ``KeyProvider/requiresExistingDatabase``).
    public var requiresExistingDatabase: Bool { base.requiresExistingDatabase }

    /// `settings` (see ``KeyProvider/cipherSettings``).
    public var cipherSettings: CipherSettings? { settings }
}

extension KeyProvider {
    /// `self`, carrying `previous`'s settings where it carries none of its own, setting by setting: a rekey or
    /// a provider replaced changes the key, never the plaintext header, salt or algorithms the file was written
    /// with.
    func keepingCipherSettings(of previous: (any KeyProvider)?) -> any KeyProvider {
        guard let old = previous?.cipherSettings else { return self }
        let kept = (cipherSettings ?? CipherSettings()).filling(from: old)
        return CipherSettingsKeyProvider(unwrappedKeyProvider, settings: kept)
    }

    /// For a rekey, which changes the key only (SQLCipher keeps the file's page size, KDF iterations,
    /// algorithms and plaintext header): `self` carrying `previous`'s settings. Call
    /// `checkRekeySettings(against:)` first.
    func keepingFileSettings(of previous: (any KeyProvider)?) -> any KeyProvider {
        guard let settings = previous?.cipherSettings else { return unwrappedKeyProvider }
        return CipherSettingsKeyProvider(unwrappedKeyProvider, settings: settings)
    }

    /// Refuses (SQLITE_MISUSE, before anything changes) a rekey to this provider when it carries settings that
    /// differ from those of `previous`, the provider the file is open with: a rekey would not apply them, and
    /// the new key would then be checked, and later used, with settings the file does not have.
    func checkRekeySettings(against previous: (any KeyProvider)?) throws {
        guard let new = cipherSettings else { return }
        let old = previous?.cipherSettings ?? CipherSettings()
        guard !new.filling(from: old).describesTheSameFile(as: old) else { return }
        throw FMDatabaseError.misuse(
            "A rekey changes the key only: the file keeps its page size, KDF iterations, algorithms and plaintext "
                + "header, and the new key provider carries cipher settings other than the provider it replaces. Give "
                + "the new provider no settings (the replaced one's are kept) or the same ones; to change settings, "
                + "export a copy.")
    }

    /// The provider under any ``CipherSettingsKeyProvider`` wrapping: what kind of provider hands out the
    /// keys (a ``KeySlotKeyProvider``, say).
    var unwrappedKeyProvider: any KeyProvider {
        (self as? CipherSettingsKeyProvider)?.base.unwrappedKeyProvider ?? self
    }
}
