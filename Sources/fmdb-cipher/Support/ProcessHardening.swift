import CToolSupport
import Foundation

/// What the tool does to its own process so keys do not leak out of it.
enum ProcessHardening {
    /// No core dumps (RLIMIT_CORE 0) and not dumpable (PR_SET_DUMPABLE 0): a crash writes no core file
    /// holding keys, and other processes of the same user cannot read /proc/PID/environ or /proc/PID/mem.
    /// Called first thing in `main`, before any key is read.
    static func disableCoreDumps() {
        if fmdb_tool_disable_core_dumps() != 0 {
            Output.message("fmdb-cipher: warning: could not turn core dumps off: \(String(cString: strerror(errno)))")
        }
    }

    /// SIGINT, SIGTERM and SIGHUP end the tool with exit 128 + the signal (130 for Ctrl-C) after removing
    /// every private directory a `PrivateOutput` registered — the partial new file (a plaintext one for
    /// decrypt), its journal and slot file — so an interrupted copy leaves nothing behind. A signal the
    /// tool was started ignoring (nohup) stays ignored. Called in `main`, before any file is made.
    static func installCleanupHandlers() {
        if fmdb_tool_install_cleanup_handlers() != 0 {
            Output.message(
                "fmdb-cipher: warning: could not install the signal handlers that remove partial output: "
                    + String(cString: strerror(errno)))
        }
    }

    /// `message` with every command-line value the user typed replaced by `(hidden)`: a misplaced key
    /// (`--key-env "$SECRET"`, a stray positional argument) must not be echoed by a usage error.
    /// swift-argument-parser quotes the values it reports in single quotes; options (`--x`) and
    /// subcommand names stay.
    static func redacted(_ message: String, arguments: [String], keeping names: Set<String>) -> String {
        var result = message
        for argument in arguments {
            var value = argument
            if argument.hasPrefix("-") {
                guard let equals = argument.firstIndex(of: "=") else { continue }
                value = String(argument[argument.index(after: equals)...])
            }
            guard !value.isEmpty, !names.contains(value) else { continue }
            result = result.replacingOccurrences(of: "'\(value)'", with: "'(hidden)'")
        }
        return result
    }
}
