import Foundation

/// A provider made again from its source whenever a queue or pool finds the database under a key it does
/// not hold (see ``KeyProvider/reloadKey()``): for a key read from a file or a secrets manager, which an
/// operator may change while the service runs. (Not for a systemd credential: systemd writes it when the
/// service starts and not again until a restart, so reading it again finds the same key.)
///
/// `load` runs once at init (its error is the init's), and again at each ``reloadKey()``; when it throws
/// there, the provider keeps the one it had. The keys it hands out are the current provider's.
///
/// ```swift
/// let provider = try ReloadableKeyProvider {
///     try RawKeyProvider(
///         material: KeyMaterial.read(from: .file(path: "/etc/app/db.key"), describedAs: "database key"))
/// }
/// let pool = try FMDatabasePool(path: "/var/lib/app/app.db", keyProvider: provider)
/// ```
///
/// - Note: FMDB compatibility: FMDB has no key providers; this is an addition.
public final class ReloadableKeyProvider: KeyProvider {
    private let load: @Sendable () throws -> any KeyProvider
    private let current: Protected<any KeyProvider>

    /// A provider made by `load`, now and at each reload.
    /// - Throws: what `load` throws.
    public init(_ load: @escaping @Sendable () throws -> any KeyProvider) throws {
        self.load = load
        current = Protected(try load())
    }

    /// The current provider's key for `request` (see `KeyProvider`).
    /// - Throws: what the current provider throws.
    public func key(for request: KeyRequest) throws -> DatabaseKey {
        try current.withLock { $0 }.key(for: request)
    }

    /// What the current provider answers (see ``KeyProvider/requiresExistingDatabase``): a reloadable
    /// key slot provider creates no file where no database is, as the key slot provider itself.
    public var requiresExistingDatabase: Bool { current.withLock { $0 }.requiresExistingDatabase }

    /// What the current provider answers (see ``KeyProvider/cipherSettings``).
    public var cipherSettings: CipherSettings? { current.withLock { $0 }.cipherSettings }

    /// Runs `load` again and uses what it made from then on.
    /// - Throws: what `load` throws; the provider then keeps the one it had.
    public func reloadKey() throws {
        let fresh = try load()
        current.withLock { $0 = fresh }
    }
}
