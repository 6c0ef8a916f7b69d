import Logging
import ServiceLifecycle
import UnixSignals

/// The store as a service of the application's service group: it reloads the database key on SIGHUP
/// (`systemctl reload`), and closes the pool at graceful shutdown, after the HTTP server, which the group stops
/// first, has answered its last request.
public struct NotesDatabaseService: Service {
    let store: NotesStore
    let logger: Logger

    public init(store: NotesStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            // A key that does not open the database is refused and logged; the service keeps its key.
            try? await store.reloadKey()
        }
        store.close()
    }
}
