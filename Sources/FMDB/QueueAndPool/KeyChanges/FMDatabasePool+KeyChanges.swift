import Foundation

extension FMDatabasePool: KeyChangeListener {
    @discardableResult
    public func rekey(using provider: any KeyProvider) throws -> FMRekeyOutcome {
        try rekey(using: provider, busyTimeout: nil)
    }

    @discardableResult
    public func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval) throws -> FMRekeyOutcome {
        try rekey(using: provider, busyTimeout: Optional(busyTimeout))
    }

    /// `FMDatabaseWriter.rekey(using:busyTimeout:)`: waits for a moment when every connection is checked in
    /// (from then on new checkouts wait until it is done), rekeys on one of them outside any transaction, and
    /// closes every other one so later ones open with the new key. Nil `busyTimeout`:
    /// `FMDatabase.sharedRekeyBusyTimeout`.
    private func rekey(using provider: any KeyProvider, busyTimeout: TimeInterval?) throws -> FMRekeyOutcome {
        try provider.checkRekeySettings(against: locked { state.keyProvider })
        if connections.isHeldByCurrentThread {
            programmingError(
                "FMDatabasePool.rekey was called from inside a pool block: it waits for every connection to be checked "
                    + "in, so it would deadlock."
            )
        }
        // Once no other key change runs and every connection is checked in: checkouts then wait until the
        // rekey is done. Until then a `replaceKeyProvider` may go first (one a block calls must not wait for it).
        var pooled: [PooledConnection]?
        while pooled == nil {
            pooled = locked {
                while state.rekeying || state.replacingKey { condition.wait() }
                guard let idle = connections.pauseIfDrained() else { return nil }
                state.rekeying = true
                return idle
            }
            if pooled == nil { connections.waitUntilDrained() }
        }
        let wasUnannounced = pooled?.first.map { !$0.announced } ?? false
        let idle = (pooled ?? []).map(\.database)
        var resumed = false
        defer {
            if !resumed { for left in connections.resume() { left.database.closeAsOwner() } }
            locked { state.rekeying = false }
            condition.broadcast()
        }
        let oldProvider = locked { state.keyProvider }
        // Checked again against the provider as it is now: another key change may have replaced it while this
        // rekey waited for its turn.
        try provider.checkRekeySettings(against: oldProvider)
        // A rekey changes the key, never the settings the file was written with (a plaintext header, its salt,
        // the algorithms): the new provider keeps those of the provider it replaces (checked above).
        let provider = provider.keepingFileSettings(of: oldProvider)
        for db in idle.dropFirst() { db.closeAsOwner() }
        let db: FMDatabase
        var announced = false
        // Not a connection to a file no longer at the path (replaced since it opened): the rekey is for the
        // file at the path.
        if let first = idle.first, first.isOpen, !first.mainFileHasMoved() {
            db = first
            announced = !wasUnannounced
        } else {
            idle.first?.closeAsOwner()
            db = try openConnection(keyProvider: oldProvider)
        }
        db.lend()
        let connectionBefore = db.connection.map(ObjectIdentifier.init)
        let outcome: FMRekeyOutcome
        do {
            outcome = try db.rekeySafely(using: provider, busyTimeout: busyTimeout ?? db.sharedRekeyBusyTimeout)
        } catch {
            db.closeAsOwner()
            throw record(error, logs: false)
        }
        // The rekey may have reopened the connection (a new SQLite handle): what `prepareDatabase` and the
        // delegate set on the old one is gone, so the new one is set up and announced again.
        if setUpAfterRekey(db, connectionBefore: connectionBefore) { announced = false }
        let rekeyed = db.rekeyedFileIdentity(path: keyPath)
        db.takeBack()  // Before it is back in `checkedIn`, where another thread may check it out.
        let left = locked {
            state.keyProvider = provider
            state.keyEpoch += 1
            return connections.resume(
                newGeneration: true, idle: db.isOpen ? [PooledConnection(database: db, announced: announced)] : [])
        }
        resumed = true
        // None while paused today (nothing is checked out or opened meanwhile); closed rather than leaked if so.
        for connection in left { connection.database.closeAsOwner() }
        KeyChangeRegistry.shared.announce(provider, rekeyed: rekeyed, from: self)
        return outcome
    }

    public func replaceKeyProvider(_ provider: any KeyProvider) throws {
        // One key change of the pool at a time: a rekey of this pool and a replacement wait for each other,
        // so the provider the pool keeps was checked against the file as the other one left it.
        locked {
            while state.rekeying || state.replacingKey { condition.wait() }
            state.replacingKey = true
        }
        // The file's settings stay what they were unless the new provider carries its own.
        let provider = provider.keepingCipherSettings(of: locked { state.keyProvider })
        defer {
            locked { state.replacingKey = false }
            condition.broadcast()
        }
        while true {
            let epoch = locked { state.keyEpoch }
            let db = try openConnection(keyProvider: provider)
            let idle: [FMDatabase]? = locked {
                // A rekey through another queue or pool of this file came in meanwhile: check again.
                guard state.keyEpoch == epoch else { return nil }
                state.keyProvider = provider
                return invalidateConnections(replacingThemWith: [PooledConnection(database: db, announced: false)])
            }
            guard let idle else {
                db.closeAsOwner()
                continue
            }
            for connection in idle { connection.closeAsOwner() }
            condition.broadcast()
            return
        }
    }

    /// A rekey through another queue or pool of this process on the same file (``KeyChangeRegistry``):
    /// every connection keyed before is dropped, new ones use `provider`.
    func adoptKeyProvider(_ provider: any KeyProvider) {
        let idle: [FMDatabase] = locked {
            state.keyProvider = provider
            state.keyEpoch += 1
            return invalidateConnections()
        }
        for connection in idle { connection.closeAsOwner() }
        condition.broadcast()
    }

    /// A connection failed its key check (the caller closed it). Under another key (rekeyed, or its data
    /// key rotated, elsewhere), or when the file at the path was replaced, every connection opened before is
    /// dropped; a connection that could only no
    /// longer read the file is dropped alone. Either way the provider is asked to read its source again
    /// (``KeyProvider/reloadKey()``) before the next connection opens.
    func keyChanged(_ failure: KeyCheckFailure) {
        statisticsCounters.countKeyChange()
        let provider: (any KeyProvider)?
        switch failure {
        case .anotherKey, .replaced:
            // Every connection opened before holds the old key, or reads the file that was at the path: all
            // are dropped.
            let idle: [FMDatabase]
            (idle, provider) = locked { (invalidateConnections(), state.keyProvider) }
            for connection in idle { connection.closeAsOwner() }
            condition.broadcast()
            let what =
                failure == .replaced
                ? "the file its connections opened is no longer the one at \(shownPath) (replaced or removed)"
                : "\(shownPath) is under a key its connections do not hold (rekeyed elsewhere)"
            logger.warning("FMDatabasePool: \(what); they are reopened with the key provider asked again.")
        case .unreadable(let code):
            provider = locked { state.keyProvider }
            logger.warning(
                """
                FMDatabasePool: a connection could no longer read \(shownPath) (code \(code)); it is \
                replaced by one opened with the key provider asked again.
                """
            )
        }
        do {
            try provider?.reloadKey()
        } catch {
            logger.error("FMDatabasePool: the key provider could not read its source again: \(error)")
        }
    }

    /// Moves the pool to a new generation whose idle connections are `new`: returns the idle connections
    /// before (to close outside the lock); checked-out ones are closed at check-in. Call with the lock held.
    private func invalidateConnections(replacingThemWith new: [PooledConnection] = []) -> [FMDatabase] {
        affinity.withLock { $0.writer = nil }
        return connections.newGeneration(idle: new).map(\.database)
    }
}
