import FMDB
import Foundation

/// Data goes to standard output; messages to standard error. Everything is written with write(2), each
/// buffer whole (short writes continued, EINTR retried): FileHandle's `write(_:)` traps on a failed write.
///
/// A failed or short write to standard output (a full disk, /dev/full, a closed descriptor) is never
/// ignored: the first one is recorded, and `runReportingErrors` then ends the command with exit 74 and a
/// message on standard error saying what was not written (for a secret, that it was never shown), even
/// where the caller (a recovery key, `keys export-raw`) did not check. A failed message on standard error
/// has nowhere to be reported and does not change the exit code.
enum Output {
    /// The first failed write to standard output: what it was, and errno.
    private nonisolated(unsafe) static var failure: (what: String, errno: Int32)?
    private static let failureLock = NSLock()

    static func line(_ text: String) {
        write(Data((text + "\n").utf8), to: STDOUT_FILENO, what: "the output")
    }

    static func message(_ text: String) {
        write(Data((text + "\n").utf8), to: STDERR_FILENO, what: "a message")
    }

    /// Text for a person at a terminal (a prompt), on standard error, without a newline.
    static func prompt(_ text: String) {
        write(Data(text.utf8), to: STDERR_FILENO, what: "a prompt")
    }

    /// Pretty, stable JSON (sorted keys) for scripts: `value`'s `Encodable` form.
    static func json(_ value: some Encodable) throws {
        write(try encoded(value) + Data("\n".utf8), to: STDOUT_FILENO, what: "the output")
    }

    /// `report` as JSON (`json`, as `json(_:)` prints it) or as its text lines.
    static func report(_ report: some Report, json: Bool) throws {
        if json {
            try self.json(report)
        } else {
            report.lines.forEach(line)
        }
    }

    /// `object` as `json(_:)` prints it, with one more member `name` whose string value `secret` writes
    /// straight from the caller's wiped memory (its text must need no JSON escaping, as a recovery key's
    /// letters, digits and hyphens do not): no copy of the secret is made. The member comes last.
    static func json(
        _ object: some Encodable, secretMember name: String,
        secret: ((UnsafeRawBufferPointer, String) -> Void) -> Void
    ) throws {
        var text = String(decoding: try encoded(object), as: UTF8.self)
        guard text.hasSuffix("}") else { throw CLIError("cannot write the JSON object", code: Exit.failure) }
        text.removeLast()
        while text.last?.isWhitespace == true { text.removeLast() }
        write(Data((text + ",\n  \"\(name)\" : \"").utf8), to: STDOUT_FILENO, what: "the output")
        secret { bytes, what in record(writeAll(STDOUT_FILENO, bytes), what: what) }
        write(Data("\"\n}\n".utf8), to: STDOUT_FILENO, what: "the output")
    }

    /// The JSON every command prints: pretty, keys sorted (scripts and tests compare it as text), `/` in a
    /// string escaped as `\/` (as the tool's JSON always had it).
    private static func encoded(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(value)
    }

    /// A secret (`what`: "the recovery key", "the data key") and a newline on standard output, straight from
    /// the caller's wiped memory (no copy is made). A failure is recorded as for any output, naming `what`.
    static func secretLine(_ bytes: UnsafeRawBufferPointer, what: String) {
        guard record(writeAll(STDOUT_FILENO, bytes), what: what) else { return }
        var newline = UInt8(ascii: "\n")
        record(withUnsafeBytes(of: &newline) { writeAll(STDOUT_FILENO, $0) }, what: what)
    }

    /// The first failed write to standard output as the tool's error (exit 74), or nil; cleared.
    static func takeFailure() -> CLIError? {
        failureLock.lock()
        defer { failureLock.unlock() }
        guard let (what, code) = failure else { return nil }
        failure = nil
        let secret = what == "the output" ? "" : " (it was not shown: do not rely on having seen it)"
        return CLIError(
            "cannot write \(what) to standard output: \(String(cString: strerror(code)))\(secret)",
            code: Exit.ioError)
    }

    private static func write(_ data: Data, to fd: Int32, what: String) {
        let error = data.withUnsafeBytes { writeAll(fd, $0) }
        if fd == STDOUT_FILENO { record(error, what: what) }
    }

    /// Records `error` (an errno, nil for success) as the first standard output failure; returns whether it
    /// was a success.
    @discardableResult
    private static func record(_ error: Int32?, what: String) -> Bool {
        guard let error else { return true }
        failureLock.lock()
        if failure == nil { failure = (what, error) }
        failureLock.unlock()
        return false
    }

    /// write(2) of all of `bytes` to `fd`: nil when written, else errno (EIO for a write that wrote nothing).
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var written = 0
        while written < bytes.count {
            let n = Foundation.write(fd, bytes.baseAddress.map { $0 + written }, bytes.count - written)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if n == 0 { return EIO }
            written += n
        }
        return nil
    }
}
