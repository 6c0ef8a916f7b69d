import Foundation

extension FMDatabasePool: KeyChangeListener {
    /// Hands the pool a new key provider, for a database whose key changed outside this process (an
    /// operator's `fmdb-cipher rekey`, a new key file): a typical SIGHUP handler. (A systemd credential is
    /// written when the service starts and not again at `systemctl reload`: a new one needs a restart.)
    ///
    /// The provider is checked first, on a new connection that must open and read the file (and is set
    /// up with `prepareDatabase`); when it does not, this throws and the pool keeps its provider and
    /// connections. When it does, the pool keys every later connection with it: that connection is
    /// checked in for the next block, idle connections are closed now and checked-out ones when their
    /// blocks return. Running blocks are not interrupted. A ``rekey(using:)-4q591`` of this pool and this call
    /// wait for each other, and a rekey through another queue or pool of the file that lands meanwhile
    /// makes it check the provider again: the provider kept is always one that opens the file as it is.
    ///
    /// ```swift
    /// let reload = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .main)
    /// reload.setEventHandler {
    ///     do {
    ///         let key = try KeyMaterial.read(from: .file(path: "/etc/app/db.key"), describedAs: "database key")
    ///         try pool.replaceKeyProvider(RawKeyProvider(material: key))
    ///     } catch {
    ///         logger.error("the new key does not open the database; the old one stays in use: \(error)")
    ///     }
    /// }
    /// ```
    ///
    /// To change the key of the database itself, use ``rekey(using:)-4q591``.
    ///
    /// - Parameter provider: The provider of the key the database is under now.
    /// - Throws: `FMDatabaseError`: code 26 when its key does not open the database, the open error, or
    ///   what `prepareDatabase` threw. Nothing changed then.
    /// - Note: FMDB compatibility: FMDB has no key providers; this is an addition.
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
