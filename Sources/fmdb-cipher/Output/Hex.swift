import Foundation

/// Lower-case hexadecimal, the tool's one encoder: a BLOB's `x'…'` in every output format, a control
/// character's `\u00XX` in JSON strings.
enum Hex {
    /// The sixteen digits as UTF-8 bytes, indexed by value.
    static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Calls `append` with the two digits of each byte of `bytes`, high nibble first.
    static func encode(_ bytes: some Sequence<UInt8>, _ append: (UInt8) -> Void) {
        for byte in bytes {
            append(digits[Int(byte >> 4)])
            append(digits[Int(byte & 0x0F)])
        }
    }

    /// `bytes` as SQLite's BLOB literal, `x'…'`.
    static func blobLiteral(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = Array("x'".utf8)
        encode(bytes) { text.append($0) }
        text.append(UInt8(ascii: "'"))
        return String(decoding: text, as: UTF8.self)
    }
}
