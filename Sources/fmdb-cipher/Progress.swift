import Foundation

/// A progress line on standard error, shown only when it is a terminal and --quiet was not given.
/// Copies report the output file's size against the input's; rekey shows elapsed time.
final class ProgressReporter: @unchecked Sendable {
    // @unchecked Sendable: `stopped` and `thread` are only touched under `lock`.
    private let lock = NSLock()
    private var stopped = false
    private var thread: Thread?
    let enabled: Bool

    init(quiet: Bool) {
        enabled = !quiet && isatty(STDERR_FILENO) == 1
    }

    /// Shows `label` with the fraction `measure()` reports (nil: elapsed seconds only), 10 times a second.
    func start(_ label: String, measure: @escaping @Sendable () -> Double?) {
        guard enabled else { return }
        let began = Date()
        let thread = Thread { [weak self] in
            while let self, !self.isStopped {
                let line: String
                if let fraction = measure() {
                    let clamped = min(max(fraction, 0), 1)
                    let filled = Int(clamped * 30)
                    line = String(
                        format: "\r%@ [%@%@] %3d%%", label, String(repeating: "#", count: filled),
                        String(repeating: " ", count: 30 - filled), Int(clamped * 100))
                } else {
                    line = String(format: "\r%@ … %.1fs", label, Date().timeIntervalSince(began))
                }
                Output.prompt(line)
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        lock.lock()
        self.thread = thread
        lock.unlock()
        thread.start()
    }

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    func finish(_ message: String) {
        lock.lock()
        stopped = true
        let wasRunning = thread != nil
        lock.unlock()
        guard enabled else { return }
        if wasRunning { Thread.sleep(forTimeInterval: 0.12) }
        Output.message("\r\u{1B}[K\(message)")
    }
}

/// The size of a file, or 0.
func fileSize(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? 0
}
