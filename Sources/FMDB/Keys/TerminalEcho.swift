import Foundation

// The terminal state a signal handler restores: set only while echo is off (see `TerminalEcho.withEchoOff`).
nonisolated(unsafe) private var restoreDescriptor: Int32 = -1
// On the heap, allocated once and never freed: the handler reads it, and a global `termios` value was
// written past its storage (AddressSanitizer: global-buffer-overflow).
nonisolated(unsafe) private let restoreState: UnsafeMutablePointer<termios> = {
    let state = UnsafeMutablePointer<termios>.allocate(capacity: 1)
    state.initialize(to: termios())
    return state
}()

/// Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) while echo is off: echo back on, then die of the same signal.
/// Only async-signal-safe calls (tcsetattr, write, signal, raise).
private func restoreTerminalAndReraise(_ number: Int32) {
    if restoreDescriptor >= 0 {
        tcsetattr(restoreDescriptor, TCSANOW, restoreState)
        _ = write(restoreDescriptor, "\n", 1)
    }
    signal(number, SIG_DFL)
    raise(number)
}

/// Reading a secret from a terminal, as getpass(3) does.
enum TerminalEcho {
    static let fatalSignals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    // One terminal at a time: the signal handler restores one saved state.
    private static let lock = NSLock()

    /// Runs `body` with echo off on `fd` when it is a terminal (type-ahead is flushed, as getpass does),
    /// and turns echo back on after it — also when a signal ends the process meanwhile (Ctrl-C at the
    /// prompt): the handler restores the terminal, then re-raises the signal with its default action.
    /// A signal the program ignores stays ignored; the program's own handlers are put back afterwards.
    static func withEchoOff<R>(_ fd: Int32, _ body: () throws -> R) rethrows -> R {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return try body() }
        lock.lock()
        defer { lock.unlock() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        restoreState.pointee = saved
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
