import Foundation
import Hummingbird
import Logging
import Prometheus

/// What the service is told at start, from its environment (systemd's `Environment=`): never a key.
public struct NotesConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var store: NotesStore.Settings

    public init(host: String = "127.0.0.1", port: Int = 8080, store: NotesStore.Settings) {
        self.host = host
        self.port = port
        self.store = store
    }

    /// `NOTES_DATABASE` (default `notes.db`), `NOTES_HOST` (127.0.0.1), `NOTES_PORT` (8080), `NOTES_POOL_SIZE`
    /// (8), the key source (`DatabaseKeySource(environment:)`) and what it opens, `NOTES_KEY_KIND` (`raw`).
    public init(environment: [String: String]) throws {
        guard let keySource = DatabaseKeySource(environment: environment) else {
            throw ConfigurationError(
                "no database key: set NOTES_KEY_FILE to a key file, or run under systemd with LoadCredential=")
        }
        guard let keyKind = DatabaseKeyKind(rawValue: environment["NOTES_KEY_KIND"] ?? "raw") else {
            throw ConfigurationError("NOTES_KEY_KIND is raw (the database's key) or slot-raw (a key slot's secret)")
        }
        guard let port = Int(environment["NOTES_PORT"] ?? "8080"),
            let poolSize = Int(environment["NOTES_POOL_SIZE"] ?? "8"), poolSize > 0
        else {
            throw ConfigurationError("NOTES_PORT and NOTES_POOL_SIZE are numbers")
        }
        self.init(
            host: environment["NOTES_HOST"] ?? "127.0.0.1", port: port,
            store: NotesStore.Settings(
                path: environment["NOTES_DATABASE"] ?? "notes.db", keySource: keySource, keyKind: keyKind,
                poolSize: poolSize, environment: environment))
    }
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The application: the database service and the HTTP server in one service group. The group starts the
/// database service, which opens and migrates the database (a wrong key, an unreadable key file or credential,
/// a failed migration fails the start with its error); requests wait for it. At SIGTERM the group stops the
/// server first, then the database service, which waits for running calls and closes the pool.
public func buildApplication(
    configuration: NotesConfiguration, logger: Logger
) -> (application: some ApplicationProtocol, store: NotesStore) {
    // The database service's metrics (OpenTelemetry's db.client.* names), served at GET /metrics.
    let metrics = PrometheusCollectorRegistry()
    let store = NotesStore(
        settings: configuration.store, logger: logger, metricsFactory: PrometheusMetricsFactory(registry: metrics))
    let router = makeRouter(store: store, logger: logger)
    router.get("metrics") { _, _ in metrics.emitToString() }
    let application = Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "notes"),
        services: [store.database],
        logger: logger)
    return (application, store)
}
