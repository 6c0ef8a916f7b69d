internal import COpenSSL
import Logging

/// OpenSSL's error queue (per thread), emptied after every failed OpenSSL call the library makes, its
/// entries reported as SQLCipher's own provider reports them (4.x: `sqlcipher_openssl_log_errors`): one line
/// per entry at error level on the "fmdb" logger, `ERR_error_string_n`'s text (library and reason; never
/// key bytes, and never the free-form data an entry may carry). A queue left full would be read as the cause
/// of the next, unrelated failure by any OpenSSL user on the thread. The crypto provider's C code reports
/// through the same function (`CryptoProviderRegistration` sets its reporter).
enum OpenSSLErrors {
    /// Empties this thread's queue after a failed call of `function`, then reports its entries (the first
    /// 16): emptied first, so that a log handler leaving OpenSSL errors of its own cannot keep it going.
    static func drain(after function: String) {
        var codes: [UInt] = []
        var code = ERR_get_error()
        while code != 0 {
            if codes.count < 16 { codes.append(code) }
            code = ERR_get_error()
        }
        var text = [CChar](repeating: 0, count: 256)
        for code in codes {
            let line = text.withUnsafeMutableBufferPointer { buffer -> String in
                guard let base = buffer.baseAddress else { return "error \(code)" }
                ERR_error_string_n(code, base, buffer.count)
                return String(cString: base)
            }
            report(function: function, text: line)
        }
    }

    /// Empties this thread's queue without a report: after a result the caller expects (an AEAD tag that
    /// does not verify under a wrong key is an answer, not a failure).
    static func clear() {
        ERR_clear_error()
    }

    /// True when this thread's queue is empty (`ERR_peek_error() == 0`).
    static var isQueueEmpty: Bool { ERR_peek_error() == 0 }

    /// Reports one entry of the queue, which `function` left.
    static func report(function: String, text: String) {
        let line = "OpenSSL error in \(function): \(text)"
        Logger(label: "fmdb").error("\(line)")
        if let observer = observer.withLock({ $0 }) { observer(line) }
    }

    // MARK: - Test hook

    /// Called with each reported line, after it is logged. Internal: reachable from `@testable import FMDB`.
    typealias ReportObserver = @Sendable (String) -> Void
    private static let observer = Protected<ReportObserver?>(nil)

    static func setReportObserver(_ observer: ReportObserver?) {
        self.observer.withLock { $0 = observer }
    }

    /// The error of a failed OpenSSL call (`what`), after the queue it left is reported and emptied.
    static func failure(_ what: String) -> FMDatabaseError {
        drain(after: what)
        return FMDatabaseError(code: SQLITE_ERROR, message: "OpenSSL \(what) failed.")
    }
}
