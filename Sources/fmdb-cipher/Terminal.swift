import Foundation

// The terminal state a signal handler restores: set only while echo is off (see `Terminal.withEchoOff`).
nonisolated(unsafe) private var restoreDescriptor: Int32 = -1
nonisolated(unsafe) private var restoreState = termios()

/// Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) while echo is off: echo back on, then die of the same signal.
private func restoreTerminalAndReraise(_ number: Int32) {
    if restoreDescriptor >= 0 {
        tcsetattr(restoreDescriptor, TCSANOW, &restoreState)
        _ = write(restoreDescriptor, "\n", 1)
    }
    signal(number, SIG_DFL)
    raise(number)
}

/// Reading a secret from a terminal, as getpass(3) does.
enum Terminal {
    private static let fatalSignals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Runs `body` with echo off on `fd` when it is a terminal (type-ahead is flushed, as getpass does),
    /// and turns echo back on after it — also when a signal ends the process meanwhile (Ctrl-C at the
    /// prompt). A signal the caller ignores stays ignored.
    static func withEchoOff<R>(_ fd: Int32, _ body: () throws -> R) rethrows -> R {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return try body() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        restoreState = saved
        restoreDescriptor = fd
        var previous: [(Int32, sighandler_t?)] = []
        for number in fatalSignals {
            let old = signal(number, restoreTerminalAndReraise)
            if unsafeBitCast(old, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) {
                signal(number, old)
            } else {
                previous.append((number, old))
            }
        }
        tcsetattr(fd, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(fd, TCSAFLUSH, &saved)
            for (number, old) in previous { signal(number, old) }
            restoreDescriptor = -1
        }
        return try body()
    }
}
