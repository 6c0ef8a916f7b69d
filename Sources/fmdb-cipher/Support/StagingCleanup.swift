import CToolSupport
import FMDB
import Foundation

/// The signal side of a library copy or private file: its private directory is registered for removal on
/// SIGINT, SIGTERM and SIGHUP from when it is made (signals blocked in between) until the library releases it.
final class StagingCleanup {
    private var cleanupSlot: Int32 = -1
    private var savedMask = sigset_t()
    private var blocked = false

    func reached(_ stage: FMDatabaseCopy.Stage) {
        switch stage {
        case .removedInterruptedCopy(let directory):
            Output.message("fmdb-cipher: note: removed \(directory), the unfinished copy of a run that was killed")
        case .creatingStagingDirectory:
            var signals = Self.fatalSignals()
            blocked = pthread_sigmask(SIG_BLOCK, &signals, &savedMask) == 0
        case .stagingDirectory(let directory):
            if let directory { cleanupSlot = fmdb_tool_cleanup_register(directory) }
            if blocked { pthread_sigmask(SIG_SETMASK, &savedMask, nil) }
            blocked = false
        case .stagingDirectoryReleased:
            // The point of no return: from here DEST is being put in place or is. SIGINT, SIGTERM and SIGHUP stay
            // blocked for the rest of the run, so the exit status says what was done (a signal now would exit
            // 128+n over a finished file; a pending one is dropped when the process exits).
            var signals = Self.fatalSignals()
            pthread_sigmask(SIG_BLOCK, &signals, nil)
            fmdb_tool_cleanup_unregister(cleanupSlot)
            cleanupSlot = -1
        default: break
        }
    }

    /// The signals whose handler removes the private directory: SIGINT, SIGTERM and SIGHUP.
    private static func fatalSignals() -> sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
        return signals
    }
}
