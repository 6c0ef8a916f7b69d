import Foundation
import Hummingbird
import Logging
import NotesStore

/// Starts the notes service: configuration from the environment, then the service group until SIGTERM or SIGINT.
@main
struct NotesServiceMain {
    static func main() async {
        var logger = Logger(label: "notes")
        logger.logLevel =
            ProcessInfo.processInfo.environment["NOTES_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .info
        do {
            let configuration = try NotesConfiguration(environment: ProcessInfo.processInfo.environment)
            let (application, _) = buildApplication(configuration: configuration, logger: logger)
            try await application.runService()
        } catch {
            logger.critical("notes service stopped", metadata: ["error": "\(error)"])
            exit(1)
        }
    }
}
