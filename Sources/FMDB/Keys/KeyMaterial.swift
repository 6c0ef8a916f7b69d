import Foundation

/// Key bytes a program reads itself (from a file, an environment variable, a terminal), held in
/// storage that is wiped with `OPENSSL_cleanse` when the last copy goes — so a passphrase never has
/// to pass through a `String` or `Data` the program cannot wipe.
///
/// ```swift
/// let material = try KeyMaterial(capacity: 4096) { buffer in
///     read(fd, buffer.baseAddress, buffer.count)   // returns the number of bytes used
/// }
/// let provider = PassphraseKeyProvider(material: material.trimmingTrailingNewline())
/// ```
///
/// `description` never shows the bytes.
public struct KeyMaterial: Sendable, CustomStringConvertible {
    let bytes: SecureBytes

    init(bytes: SecureBytes) {
        self.bytes = bytes
    }

    /// Fills up to `capacity` bytes with `fill`, which returns how many it used (a negative count is
    /// an error). The unused part of the buffer is wiped too.
    public init(capacity: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Int) throws {
        let scratch = SecureBytes(count: capacity) { _ in }
        let used = try scratch.withUnsafeMutableBytes { try fill($0) }
        guard used >= 0, used <= capacity else {
            throw FMDatabaseError.misuse("Reading the key failed.")
        }
        bytes = SecureBytes(count: used) { out in
            scratch.withUnsafeBytes { out.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<used])) }
        }
    }

    /// Copies `source` into wiped storage (the caller remains responsible for `source`).
    public init(copying source: UnsafeRawBufferPointer) {
        bytes = SecureBytes(count: source.count) { $0.copyMemory(from: source) }
    }

    /// How many bytes the key material holds.
    public var count: Int { bytes.count }
    /// Whether the key material is empty (an empty key is refused everywhere).
    public var isEmpty: Bool { bytes.isEmpty }

    /// Without one trailing "\n" (or "\r\n"), as a key file written by `echo` ends.
    public func trimmingTrailingNewline() -> KeyMaterial {
        bytes.withUnsafeBytes { raw in
            var end = raw.count
            if end > 0, raw[end - 1] == UInt8(ascii: "\n") {
                end -= 1
                if end > 0, raw[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            }
            guard end != raw.count else { return self }
            return KeyMaterial(copying: UnsafeRawBufferPointer(rebasing: raw[0..<end]))
        }
    }

    /// Constant-time comparison (`CRYPTO_memcmp`), e.g. to confirm a key typed twice.
    public func isEqual(to other: KeyMaterial) -> Bool {
        bytes.isEqual(to: other.bytes)
    }

    /// The material as a 32-byte raw key: 32 bytes as they are, or 64 hexadecimal digits.
    func rawKey() throws -> SecureBytes {
        if bytes.count == 32 { return bytes }
        guard bytes.count == 64 else {
            throw FMDatabaseError.misuse(
                "A raw key must be 32 bytes or 64 hexadecimal digits (got \(bytes.count) bytes).")
        }
        return try Self.decodeHex(bytes, from: 0, count: 32)
    }

    /// The material as a raw key and, when given, the 16-byte salt SQLCipher should use with it: 32 bytes as
    /// they are, or hexadecimal digits, 64 (the key) or 96 (the key, then the salt), bare or as SQLCipher's
    /// literal `x'…'` (the form `PRAGMA key` takes). Nothing else, and no key byte in the message.
    func rawKeyAndSalt() throws -> (key: SecureBytes, salt: SecureBytes?) {
        if bytes.count == 32 { return (bytes, nil) }
        let quoted = bytes.withUnsafeBytes { raw in
            raw.count >= 3 && (raw[0] == UInt8(ascii: "x") || raw[0] == UInt8(ascii: "X"))
                && raw[1] == UInt8(ascii: "'") && raw[raw.count - 1] == UInt8(ascii: "'")
        }
        let start = quoted ? 2 : 0
        let digits = bytes.count - (quoted ? 3 : 0)
        guard digits == 64 || digits == 96 else {
            throw FMDatabaseError.misuse(
                "A raw key must be 32 bytes, or 64 hexadecimal digits (96 with the 16-byte salt after the key), "
                    + "bare or as x'…' (got \(bytes.count) bytes).")
        }
        let key = try Self.decodeHex(bytes, from: start, count: 32)
        let salt = digits == 96 ? try Self.decodeHex(bytes, from: start + 64, count: 16) : nil
        return (key, salt)
    }

    /// `count` bytes decoded from the hexadecimal digits of `hex` at `offset`.
    private static func decodeHex(_ hex: SecureBytes, from offset: Int, count: Int) throws -> SecureBytes {
        try hex.withUnsafeBytes { hex in
            try SecureBytes(count: count) { out in
                func nibble(_ c: UInt8) throws -> UInt8 {
                    switch c {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
                    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
                    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
                    default: throw FMDatabaseError.misuse("A raw key in hexadecimal may hold only 0-9 and a-f.")
                    }
                }
                for index in 0..<count {
                    out[index] = try nibble(hex[offset + 2 * index]) << 4 | nibble(hex[offset + 2 * index + 1])
                }
            }
        }
    }

    /// A description that never shows key bytes.
    public var description: String { "KeyMaterial(\(count) bytes, redacted)" }
}

extension SecureBytes {
    /// Mutable access while the storage is still private to its creator (KeyMaterial's fill step).
    func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes { try body(UnsafeMutableRawBufferPointer(mutating: $0)) }
    }
}

extension PassphraseKeyProvider {
    /// A passphrase from wiped key material.
    public init(material: KeyMaterial) {
        self.init(key: DatabaseKey(material: .passphrase(material.bytes)))
    }
}

extension RawKeyProvider {
    /// A raw key from key material: 32 bytes, or hexadecimal digits, 64 (the key) or 96 (the key, then the
    /// 16-byte salt of a new file), bare or as SQLCipher's literal `x'…'`.
    /// - Throws: `FMDatabaseError` (SQLITE_MISUSE) for anything else; the message holds no key byte.
    public init(material: KeyMaterial) throws {
        let (key, salt) = try material.rawKeyAndSalt()
        self.init(key: DatabaseKey(material: .raw(key: key, salt: salt)))
    }
}

extension PBKDF2KeyProvider {
    /// A provider for a passphrase held in wiped key material.
    public convenience init(material: KeyMaterial, digest: Digest = .sha512, iterations: Int = 256_000) {
        self.init(secret: material.bytes, digest: digest, iterations: iterations, allowsWeak: false)
    }

    /// The linked SQLCipher's own KDF for each file's format (see `sqlcipherCompatible(passphrase:)`), for a
    /// passphrase held in wiped key material.
    public static func sqlcipherCompatible(material: KeyMaterial) -> PBKDF2KeyProvider {
        compatible(material.bytes, format: nil)
    }
}

extension ScryptKeyProvider {
    /// A provider for a passphrase held in wiped key material (default parameters).
    public convenience init(material: KeyMaterial) {
        self.init(secret: material.bytes, n: 1 << 15, r: 8, p: 1, maxMemory: 64 * 1024 * 1024, allowsWeak: false)
    }
}
