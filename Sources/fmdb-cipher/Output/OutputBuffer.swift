import FMDB
import Foundation

/// Standard output in 64 KiB writes (one write(2) per line made `sql --csv` on a million rows slow).
final class OutputBuffer {
    private var bytes: [UInt8] = []
    private let fd: Int32
    private static let capacity = 1 << 16

    init(fd: Int32 = STDOUT_FILENO) {
        self.fd = fd
        bytes.reserveCapacity(Self.capacity + 4096)
    }

    @inline(__always) func append(_ byte: UInt8) { bytes.append(byte) }

    func append(_ pointer: UnsafePointer<UInt8>, count: Int) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: pointer, count: count))
    }

    func append(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// An integer in decimal.
    func append(_ value: Int64) {
        var magnitude = value.magnitude
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        let start = bytes.count
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        bytes[start...].reverse()
    }

    /// Writes out once the buffer holds 64 KiB.
    @inline(__always) func flushIfFull() throws {
        if bytes.count >= Self.capacity { try flush() }
    }

    /// Writes everything out (exit 74 when standard output fails, e.g. a full disk).
    func flush() throws {
        var written = 0
        try bytes.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = write(fd, buffer.baseAddress.map { $0 + written }, buffer.count - written)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw CLIError("cannot write the output: \(String(cString: strerror(errno)))", code: Exit.ioError)
                }
                written += n
            }
        }
        bytes.removeAll(keepingCapacity: true)
    }
}

extension OutputBuffer {
    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> [UInt8] {
        let buffer = OutputBuffer()
        var text = text
        text.withUTF8 { buffer.appendJSONString($0) }
        return buffer.bytes
    }

    /// UTF-8 bytes as a JSON string: quotes, backslashes and control characters escaped; invalid UTF-8
    /// replaced (U+FFFD) so the output is always valid JSON.
    func appendJSONString(_ text: UnsafeBufferPointer<UInt8>) {
        if text.contains(where: { $0 >= 0x80 }) {
            var repaired = String(decoding: text, as: UTF8.self)
            repaired.withUTF8 { appendEscaped($0) }
        } else {
            appendEscaped(text)
        }
    }

    private func appendEscaped(_ text: UnsafeBufferPointer<UInt8>) {
        append(UInt8(ascii: "\""))
        for byte in text {
            switch byte {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 10: append("\\n")
            case 13: append("\\r")
            case 9: append("\\t")
            case 0..<0x20:
                append("\\u00")
                Hex.encode(CollectionOfOne(byte)) { append($0) }
            default: append(byte)
            }
        }
        append(UInt8(ascii: "\""))
    }
}
