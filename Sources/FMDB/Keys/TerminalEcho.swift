import Foundation

// What the signal handler reads, all set before it is installed: the terminal and its state with echo on
// (to restore) and off (to put back if a chained handler returns and the prompt goes on), and each signal's
// disposition before `TerminalEcho.withEchoOff`. On the heap, allocated once and never freed: a global
// `termios` value was written past its storage (AddressSanitizer: global-buffer-overflow).
nonisolated(unsafe) private var restoreDescriptor: Int32 = -1
nonisolated(unsafe) private let restoreState: UnsafeMutablePointer<termios> = {
    let state = UnsafeMutablePointer<termios>.allocate(capacity: 2)
    state.initialize(repeating: termios(), count: 2)
    return state
}()
private let signalSlots = 65
nonisolated(unsafe) private let previousActions: UnsafeMutablePointer<sigaction> = {
    let actions = UnsafeMutablePointer<sigaction>.allocate(capacity: signalSlots)
    actions.initialize(repeating: sigaction(), count: signalSlots)
    return actions
}()

/// SIG_DFL and SIG_IGN as the numbers they are.
private func dispositionNumber(_ action: sigaction) -> Int {
    unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
}

/// Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) while echo is off: echo back on, then the disposition the signal had
/// before the prompt. A handler the program installed (the tool's, which removes partial output) is called
/// as it asked to be (`SA_SIGINFO` or not); if it returns, the prompt goes on with echo off again. The
/// default action is put back and the signal raised again: it is blocked while this runs, so the process
/// ends of it as this returns. Only async-signal-safe calls (tcsetattr, write, sigaction, raise).
private func restoreTerminalAndChain(
    _ number: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _ context: UnsafeMutableRawPointer?
) {
    let fd = restoreDescriptor
    if fd >= 0 {
        tcsetattr(fd, TCSANOW, restoreState)
        _ = write(fd, "\n", 1)
    }
    guard number > 0 && Int(number) < signalSlots else { return }
    var previous = previousActions[Int(number)]
    let handler = previous.__sigaction_handler
    if previous.sa_flags & SA_SIGINFO != 0, let chained = handler.sa_sigaction {
        chained(number, info, context)
    } else if dispositionNumber(previous) > 1, let chained = handler.sa_handler {
        chained(number)
    } else if dispositionNumber(previous) == 0 {
        sigaction(number, &previous, nil)
        raise(number)
        return
    }
    // Echo off again only while the prompt still runs (the prompt's end forgets the descriptor first).
    if fd >= 0, restoreDescriptor == fd { tcsetattr(fd, TCSANOW, restoreState + 1) }
}

/// Reading a secret from a terminal, as getpass(3) does.
enum TerminalEcho {
    static let fatalSignals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    // One terminal at a time: the signal handler restores one saved state.
    private static let lock = NSLock()

    /// Runs `body` with echo off on `fd` when it is a terminal (type-ahead is flushed, as getpass does),
    /// and turns echo back on after it — also when a signal arrives meanwhile (Ctrl-C at the prompt): the
    /// handler restores the terminal, then the signal's previous disposition runs (the program's own
    /// handler, or the default action, which ends the process). A signal the program ignores stays
    /// ignored. The previous dispositions are saved and put back with sigaction(2), flags and mask included.
    static func withEchoOff<R>(_ fd: Int32, _ body: () throws -> R) rethrows -> R {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return try body() }
        lock.lock()
        defer { lock.unlock() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        restoreState.pointee = saved
        (restoreState + 1).pointee = quiet
        restoreDescriptor = fd
        var handler = sigaction()
        handler.__sigaction_handler.sa_sigaction = restoreTerminalAndChain
        handler.sa_flags = SA_SIGINFO
        // The other fatal signals wait while the handler runs: one restore and one chain at a time.
        sigemptyset(&handler.sa_mask)
        for number in fatalSignals { sigaddset(&handler.sa_mask, number) }
        var installed: [Int32] = []
        for number in fatalSignals {
            var current = sigaction()
            guard sigaction(number, nil, &current) == 0, dispositionNumber(current) != 1 else { continue }
            // Saved before the handler that reads it is installed.
            previousActions[Int(number)] = current
            if sigaction(number, &handler, nil) == 0 { installed.append(number) }
        }
        tcsetattr(fd, TCSAFLUSH, &quiet)
        defer {
            // The handler first forgets the terminal and is removed, then echo comes back: a signal between the
            // two steps must not turn echo off again after the prompt ended (a program's handler that returns).
            restoreDescriptor = -1
            for number in installed { sigaction(number, previousActions + Int(number), nil) }
            tcsetattr(fd, TCSAFLUSH, &saved)
        }
        return try body()
    }
}
