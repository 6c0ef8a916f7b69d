/// Why an ``FMDatabaseService`` refused a call: it is shutting down or stopped, or `run()` was called twice.
/// Errors met opening the database are `FMDatabaseError`s (see ``FMDatabaseService/run()``).
///
/// ```swift
/// do {
///     try await service.perform { db in try db.execute("DELETE FROM sessions") }
/// } catch let error as FMDatabaseServiceError where error.code == .shutDown {
///     // The service is going down: answer 503.
/// }
/// ```
///
/// `FMErrorDisposition` sees it as `.permanent`: running the call again on this service fails again.
public struct FMDatabaseServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// Graceful shutdown began (or `run()` ended): the service takes no new call.
        case shutDown
        /// `run()` was called on a service that runs, or ran, already: a service runs once.
        case alreadyRunning
    }

    /// What went wrong.
    public let code: Code
    /// The database file, as logs show it (a `file:` URI without its query).
    public let file: String

    /// An error of `code` for `file` (the path as logs show it).
    public init(code: Code, file: String) {
        self.code = code
        self.file = file
    }

    /// A sentence for a log or a response body.
    public var description: String {
        switch code {
        case .shutDown:
            return "The database service for \(file) is shutting down: it takes no new call."
        case .alreadyRunning:
            return "The database service for \(file) runs already: run() is called once."
        }
    }
}
