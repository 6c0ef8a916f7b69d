import Foundation

/// Progress on standard error. On a terminal (unless --quiet): a bar with the percentage, throughput and
/// time left (once it can be estimated), drawn when the work starts, redrawn 10 times a second over the whole
/// line (nothing of a longer earlier state stays behind), and left at 100% with the time taken when the work
/// is done in full (elapsed time when there is no measure). The percentage never goes back: a measure that
/// drops (a rollback journal deleted at the commit, a WAL truncated by the checkpoint) keeps the highest.
/// Not on a terminal, with `--progress`:
/// machine-readable lines, one when the work starts, about one a second, and one at 100% when it ends:
///
///     progress <verb> <percent> <bytes done> <bytes in all> <bytes per second>
///
/// integers in decimal, separated by one space (`progress rekey 42 50331648 119537664 10485760`); no line
/// at 100% means the work did not complete. Otherwise nothing. Copies report the output file's size against
/// the input's; rekey the pages it has written (its rollback journal or WAL) against the database's size.
final class ProgressReporter: @unchecked Sendable {
    // @unchecked Sendable: `stopped`, `thread` and `lastLine` are only touched under `lock`.
    private enum Style { case none, terminal, lines }

    private let lock = NSLock()
    private var stopped = false
    private var thread: Thread?
    private let style: Style
    private var began = Date()
    private var totalBytes: Double?
    private var measure: (@Sendable () -> Double?)?
    private var verb = ""
    private var label: String?
    /// The highest fraction shown so far (only ever grows while the work runs).
    private var highest = 0.0

    /// Whether anything is shown.
    var enabled: Bool { style != .none }

    /// - Parameters:
    ///   - quiet: `--quiet`: nothing at all.
    ///   - lines: `--progress`: machine-readable lines when standard error is not a terminal.
    init(quiet: Bool, lines: Bool = false) {
        if quiet {
            style = .none
        } else if isatty(STDERR_FILENO) == 1 {
            style = .terminal
        } else {
            style = lines ? .lines : .none
        }
    }

    /// Shows `label` with the fraction `measure()` reports (nil: elapsed seconds only); with `totalBytes`, also
    /// the throughput (that fraction of `totalBytes` per second).
    func start(_ label: String, totalBytes: Double? = nil, measure: @escaping @Sendable () -> Double?) {
        guard style != .none else { return }
        began = Date()
        lock.lock()
        highest = 0
        lock.unlock()
        self.totalBytes = totalBytes
        self.measure = measure
        verb = label.split(separator: " ").first.map(String.init) ?? label
        // The first state at once (a terminal's bar at 0%, the first line), whatever the work then takes.
        switch style {
        case .lines: line(fraction: 0)
        case .terminal: draw(label)
        case .none: break
        }
        self.label = label
        let thread = Thread { [weak self] in
            var lastLine = Date()
            while let self, !self.isStopped {
                Thread.sleep(forTimeInterval: 0.1)
                guard !self.isStopped else { return }
                switch self.style {
                case .terminal: self.draw(label)
                case .lines:
                    if Date().timeIntervalSince(lastLine) >= 1 {
                        lastLine = Date()
                        self.line(fraction: self.monotonic(min(max(measure() ?? 0, 0), 0.99)))
                    }
                case .none: return
                }
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

    /// `fraction`, or the highest shown before when it is lower.
    private func monotonic(_ fraction: Double) -> Double {
        lock.lock()
        defer { lock.unlock() }
        highest = max(highest, fraction)
        return highest
    }

    /// "ETA M:SS" from the elapsed time and the fraction done, once both say something (nil before).
    private func timeLeft(_ fraction: Double) -> String? {
        let elapsed = Date().timeIntervalSince(began)
        guard fraction >= 0.01, fraction < 1, elapsed >= 0.2 else { return nil }
        let seconds = Int((elapsed * (1 - fraction) / fraction).rounded())
        return String(format: "ETA %d:%02d", seconds / 60, seconds % 60)
    }

    private func throughput(_ fraction: Double) -> Double? {
        guard let totalBytes else { return nil }
        return fraction * totalBytes / max(Date().timeIntervalSince(began), 1e-3)
    }

    /// Draws the bar over the whole line: from its start, and cleared to its end after the text.
    private func draw(_ label: String, fraction done: Double? = nil) {
        let text: String
        if let fraction = done ?? measure?() {
            let clamped = monotonic(min(max(fraction, 0), 1))
            let filled = Int(clamped * 30)
            let rate = throughput(clamped).map { String(format: " %.1f MB/s", $0 / 1e6) } ?? ""
            let time =
                clamped >= 1
                ? String(format: " in %.1fs", Date().timeIntervalSince(began))
                : timeLeft(clamped).map { " " + $0 } ?? ""
            text = String(
                format: "%@ [%@%@] %3d%%%@%@", label, String(repeating: "#", count: filled),
                String(repeating: " ", count: 30 - filled), Int(clamped * 100), rate, time)
        } else {
            text = String(format: "%@ … %.1fs", label, Date().timeIntervalSince(began))
        }
        Output.prompt("\r" + text + "\u{1B}[K")
    }

    /// One machine-readable line (`--progress`).
    private func line(fraction: Double) {
        let total = totalBytes ?? 0
        let done = Int64(fraction * total)
        let rate = Int64(throughput(fraction) ?? 0)
        Output.message("progress \(verb) \(Int(fraction * 100)) \(done) \(Int64(total)) \(rate)")
    }

    /// The line at 100% (`--progress`) of work that started and is now done in full, after `finish` (without
    /// `completed`) stopped its display at an earlier step: a copy's line comes once it is verified and in place.
    func complete() {
        lock.lock()
        let started = thread != nil
        let wasRunning = started && !stopped
        stopped = true
        lock.unlock()
        guard style == .lines, started else { return }
        if wasRunning { Thread.sleep(forTimeInterval: 0.12) }
        line(fraction: 1)
    }

    /// Stops the display and says `message` on a terminal; with `completed`, the line at 100% (`--progress`).
    func finish(_ message: String, completed: Bool = false) {
        lock.lock()
        let wasRunning = thread != nil && !stopped
        stopped = true
        lock.unlock()
        switch style {
        case .none: return
        case .terminal:
            if wasRunning { Thread.sleep(forTimeInterval: 0.12) }
            // Work done in full leaves its bar at 100%, with the throughput and time of the whole run, and the
            // message on the next line; otherwise the message takes the bar's place.
            if completed, let label, measure?() != nil {
                draw(label, fraction: 1)
                Output.prompt("\n")
            }
            Output.message("\r\u{1B}[K\(message)")
        case .lines:
            if wasRunning { Thread.sleep(forTimeInterval: 0.12) }
            if completed { line(fraction: 1) }
        }
    }
}
