import FMDB
import FMDBService
import Hummingbird
import Logging

/// Answers a store error by what `FMErrorDisposition` says a client can do about it.
///
/// - transient (a lock held past the busy timeout, a pool transaction that waited past its turn): 503 with
///   `Retry-After`: the same request may succeed in a moment.
/// - connectionReplaced (the request met a key change twice in a row; the store ran it again once already):
///   503 with `Retry-After` too.
/// - cancelled (the client went away, the server is stopping), or the database service is shutting down: 503.
/// - permanent: 500, with the error logged and not shown (it names the file, never a key).
func httpError(for error: any Error, logger: Logger) -> HTTPError {
    if let error = error as? FMDatabaseServiceError, error.code == .shutDown {
        return HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: "shutting down")
    }
    let disposition = FMErrorDisposition(error)
    switch disposition {
    case .transient, .connectionReplaced, .cancelled:
        logger.notice("database unavailable", metadata: ["disposition": "\(disposition)", "error": "\(error)"])
        return HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: "database busy, retry later")
    case .permanent:
        logger.error("database error", metadata: ["error": "\(error)"])
        return HTTPError(.internalServerError, message: "database error")
    }
}

/// `body` with any database error it throws turned into the HTTP answer above; HTTP errors pass through.
func answering<T>(logger: Logger, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as HTTPError {
        throw error
    } catch {
        throw httpError(for: error, logger: logger)
    }
}
