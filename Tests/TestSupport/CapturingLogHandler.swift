import Foundation
import Logging

/// Collects every log line, for tests that check what was (and was not) logged.
public final class LogCapture: Sendable {
    private let lines = Locked<[String]>([])

    public init() {}

    public var all: [String] { lines.withLock { $0 } }

    public func append(_ line: String) { lines.withLock { $0.append(line) } }

    /// A logger that writes here.
    public func logger(label: String = "fmdb-test") -> Logger {
        Logger(label: label) { _ in CapturingLogHandler(capture: self) }
    }
}

public struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        capture.append("\(event.level) \(event.message)")
    }
}
