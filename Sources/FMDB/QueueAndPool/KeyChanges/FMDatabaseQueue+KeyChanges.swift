import Foundation

extension FMDatabaseQueue: KeyChangeListener {
    @discardableResult
    public func rekey(using provider: any KeyProvider) throws -> FMRekeyOutcome {
        try rekey(using: provider, busyTimeout: nil)
    }

    @discardableResult
    public func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval) throws -> FMRekeyOutcome {
        try rekey(using: provider, busyTimeout: Optional(busyTimeout))
    }

    /// `FMDatabaseWriter.rekey(using:busyTimeout:)`, on the queue (so outside any block and any transaction);
    /// nil `busyTimeout`: `FMDatabase.sharedRekeyBusyTimeout`.
    private func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval?) throws -> FMRekeyOutcome {
        try onQueue {
            // A rekey changes the key, never the settings the file was written with (a plaintext header, its
            // salt, the algorithms): the new provider keeps those of the provider it replaces.
            try provider.checkRekeySettings(against: keyProvider)
            let provider = provider.keepingFileSettings(of: keyProvider)
            var db = try openDatabase()
            if db.mainFileHasMoved() {
                // The connection reads a file no longer at the path (replaced since its last key check): the
                // rekey is for the file at the path, on a connection that opens it.
                keyChanged(.replaced)
                db = try openDatabase()
            }
            let connectionBefore = db.connection.map(ObjectIdentifier.init)
            let outcome = try db.rekeySafely(using: provider, busyTimeout: busyTimeout ?? db.sharedRekeyBusyTimeout)
            keyProvider = provider
            setUpAfterRekey(db, connectionBefore: connectionBefore)
            if !db.isOpen {
                // The rekey took but the connection could not be reopened: the next call reopens it.
                database = nil
                interruptTarget.withLock { $0 = nil }
            } else {
                interruptTarget.withLock { $0 = db.interruptHandle }
            }
            KeyChangeRegistry.shared.announce(provider, rekeyed: db.rekeyedFileIdentity(path: keyPath), from: self)
            return outcome
        }
    }

    public func replaceKeyProvider(_ provider: any KeyProvider) throws {
        try onQueue {
            // The file's settings stay what they were unless the new provider carries its own.
            let provider = provider.keepingCipherSettings(of: keyProvider)
            while true {
                let before = adoptions.withLock { $0 }
                let db = try openConnection(keyProvider: provider)
                // A rekey through another queue or pool of the file landed while this provider was checked:
                // check it again against the file as that left it. When it fails, the provider the rekey
                // handed over stays pending and the next call takes it up.
                let landed: Bool = adoptions.withLock { count in
                    guard count == before else { return true }
                    adoptedProvider.withLock { $0 = nil }
                    return false
                }
                guard !landed else {
                    db.closeAsOwner()
                    continue
                }
                closeDatabase()
                keyProvider = provider
                database = db
                interruptTarget.withLock { $0 = db.interruptHandle }
                return
            }
        }
    }

    /// The connection failed its key check (`failure`: the file is under a key it does not hold, rekeyed
    /// or its data key rotated elsewhere, or it cannot read the file any more): it is closed, whatever code
    /// SQLCipher reports on it, and the provider reads its source again (``KeyProvider/reloadKey()``)
    /// before the next one opens. Runs on the queue.
    func keyChanged(_ failure: KeyCheckFailure) {
        closeDatabase()
        switch failure {
        case .anotherKey:
            logger.warning(
                """
                FMDatabaseQueue: \(shownPath) is under a key its connection does not hold (rekeyed \
                elsewhere); it is reopened with the key provider asked again.
                """
            )
        case .unreadable(let code):
            logger.warning(
                """
                FMDatabaseQueue: its connection could no longer read \(shownPath) (code \(code)); it is \
                reopened with the key provider asked again.
                """
            )
        case .replaced:
            logger.warning(
                """
                FMDatabaseQueue: the file its connection opened is no longer the one at \(shownPath) \
                (replaced or removed); it is reopened at the path with the key provider asked again.
                """
            )
        }
        do {
            try keyProvider?.reloadKey()
        } catch {
            logger.error("FMDatabaseQueue: the key provider could not read its source again: \(error)")
        }
    }

    /// A rekey through another queue or pool of this process on the same file (``KeyChangeRegistry``):
    /// the next call drops the connection keyed before and keys a new one with `provider`.
    func adoptKeyProvider(_ provider: any KeyProvider) {
        adoptions.withLock { count in
            adoptedProvider.withLock { $0 = provider }
            count += 1
        }
    }
}
