import Foundation

/// The key changes of a queue or pool for async code: the same calls, run off the cooperative thread pool
/// (each may wait for running blocks, another key change, a key derivation and the file).
extension FMDatabaseWriter {
    /// The synchronous ``replaceKeyProvider(_:)`` for async code: hands the queue or pool the provider of the
    /// key the database is under now (a service's reload after an operator's rekey), and returns once every
    /// later connection will be keyed with it. It runs to its end once started: cancelling the task does not
    /// stop it.
    ///
    /// ```swift
    /// let key = try KeyMaterial.read(from: .file(path: "/etc/app/db.key"), describedAs: "database key")
    /// try await writer.replaceKeyProvider(RawKeyProvider(material: key))
    /// ```
    ///
    /// - Parameter provider: The provider of the key the database is under now.
    /// - Throws: as the synchronous form: code 26 when its key does not open the database, the open
    ///   error, or what `prepareDatabase` threw. Nothing changed then.
    /// - Note: FMDB compatibility: an addition.
    public func replaceKeyProvider(_ provider: any KeyProvider) async throws {
        try await BlockingCall.run { try self.replaceKeyProvider(provider) }
    }

    /// The synchronous ``rekey(using:)`` for async code: rekeys the database and switches the queue or pool
    /// to `provider`. It runs to its end once started: cancelling the task does not stop it.
    ///
    /// ```swift
    /// let outcome = try await writer.rekey(using: newProvider)
    /// ```
    ///
    /// - Returns: `.done`, or `.checkpointPending` (the key did change).
    /// - Throws: when the rekey did not take; the database then still opens with the old key, and the queue
    ///   or pool keeps using it.
    /// - Note: FMDB compatibility: an addition.
    @discardableResult
    public func rekey(using provider: any KeyProvider) async throws -> FMRekeyOutcome {
        try await BlockingCall.run { try self.rekey(using: provider) }
    }

    /// The synchronous ``rekey(using:busyTimeout:)`` for async code: the async `rekey(using:)` with the busy
    /// timeout given.
    ///
    /// ```swift
    /// let outcome = try await writer.rekey(using: newProvider, busyTimeout: 30)
    /// ```
    ///
    /// - Returns: `.done`, or `.checkpointPending` (the key did change).
    /// - Throws: when the rekey did not take; the database then still opens with the old key.
    /// - Note: FMDB compatibility: an addition.
    @discardableResult
    public func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval) async throws -> FMRekeyOutcome {
        try await BlockingCall.run { try self.rekey(using: provider, busyTimeout: busyTimeout) }
    }
}
