import Foundation

/// Key bytes in memory that is wiped with `OPENSSL_cleanse` when the last copy goes.
///
/// Value semantics over one immutable, reference-counted buffer (swift-crypto's `SecureBytes`
/// idea): copies share the buffer; it is wiped and freed when the last copy is released. Never
/// printed: `description` does not show the bytes.
struct SecureBytes: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    fileprivate final class Storage: @unchecked Sendable {
        // Immutable after init; @unchecked because the buffer is a raw pointer.
        let buffer: UnsafeMutableRawBufferPointer

        init(count: Int) {
            buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
        }

        deinit {
            if let base = buffer.baseAddress {
                OpenSSLMemory.cleanse(base, count: buffer.count)
            }
            SecureBytes.notifyWiped(UnsafeRawBufferPointer(buffer))
            buffer.deallocate()
        }
    }

    private let storage: Storage
    let count: Int

    /// Allocates `count` bytes and lets `initializer` fill them.
    init(count: Int, _ initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        storage = Storage(count: count)
        self.count = count
        try initializer(UnsafeMutableRawBufferPointer(rebasing: storage.buffer[0..<count]))
    }

    init(_ data: Data) {
        self.init(count: data.count) { buffer in
            data.withUnsafeBytes { buffer.copyMemory(from: $0) }
        }
    }

    init(utf8 string: String) {
        var string = string
        let count = string.utf8.count
        self.init(count: count) { buffer in
            string.withUTF8 { buffer.copyMemory(from: UnsafeRawBufferPointer($0)) }
        }
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage.buffer[0..<count]))
    }

    var isEmpty: Bool { count == 0 }

    /// Constant-time comparison (`CRYPTO_memcmp`).
    func isEqual(to other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        if count == 0 { return true }
        return withUnsafeBytes { lhs in
            other.withUnsafeBytes { rhs in
                guard let l = lhs.baseAddress, let r = rhs.baseAddress else { return false }
                return OpenSSLMemory.equalInConstantTime(l, r, count: count)
            }
        }
    }

    /// `x'<hex>'`, SQLCipher's raw-key syntax (upper-case digits), in secure storage of its own.
    func sqlcipherHexLiteral(appending salt: SecureBytes? = nil) -> SecureBytes {
        let saltCount = salt?.count ?? 0
        return SecureBytes(count: 3 + 2 * (count + saltCount)) { out in
            out[0] = UInt8(ascii: "x")
            out[1] = UInt8(ascii: "'")
            var position = withUnsafeBytes { HexDigits.uppercase.write($0, into: out, at: 2) }
            if let salt { position = salt.withUnsafeBytes { HexDigits.uppercase.write($0, into: out, at: position) } }
            out[position] = UInt8(ascii: "'")
        }
    }

    /// The bytes as hexadecimal digits, in secure storage of its own.
    func hex(_ digits: HexDigits) -> SecureBytes {
        SecureBytes(count: 2 * count) { out in
            _ = withUnsafeBytes { digits.write($0, into: out, at: 0) }
        }
    }

    var description: String { "SecureBytes(\(count) bytes)" }
    var debugDescription: String { description }

    // MARK: - Test hook

    /// Called with each buffer right after it is wiped and before it is freed, so tests can check
    /// that it holds only zeros. Internal: reachable from `@testable import FMDB` only.
    typealias WipeObserver = @Sendable (UnsafeRawBufferPointer) -> Void
    private static let observer = Protected<WipeObserver?>(nil)

    static func setWipeObserver(_ observer: WipeObserver?) {
        self.observer.withLock { $0 = observer }
    }

    fileprivate static func notifyWiped(_ buffer: UnsafeRawBufferPointer) {
        if let observer = observer.withLock({ $0 }) { observer(buffer) }
    }
}

/// Fresh random bytes from OpenSSL's CSPRNG.
func secureRandomBytes(_ count: Int) throws -> SecureBytes {
    try SecureBytes(count: count) { buffer in
        guard OpenSSLMemory.randomBytes(into: buffer) else {
            throw FMDatabaseError(code: SQLITE_ERROR, message: "OpenSSL RAND_bytes failed.")
        }
    }
}

/// The library's one hexadecimal encoder (two digits per byte, high nibble first), for key bytes in wiped
/// storage (`SecureBytes.hex`, SQLCipher's `x'...'` literal) and for public bytes (`Data.hexString`).
enum HexDigits {
    case lowercase, uppercase

    /// Writes the digits of `bytes` into `out` from `position` on, which must leave room for
    /// `2 * bytes.count` of them; returns the position after the last.
    func write(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer, at position: Int) -> Int {
        let digits: StaticString = self == .lowercase ? "0123456789abcdef" : "0123456789ABCDEF"
        return digits.withUTF8Buffer { hex in
            var position = position
            for byte in bytes {
                out[position] = hex[Int(byte >> 4)]
                out[position + 1] = hex[Int(byte & 0x0F)]
                position += 2
            }
            return position
        }
    }
}
