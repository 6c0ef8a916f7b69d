import Foundation

/// A recovery key, as it is shown to the user once. Its text lives in wiped storage; `description`
/// never shows it.
///
/// ```swift
/// let (_, recovery) = try KeySlots.addRecoverySlot(to: path, unlockingWith: .passphrase("admin"))
/// recovery.withFormattedText { FileHandle.standardOutput.write(Data($0)) }
/// ```
public struct RecoveryKey: Sendable, CustomStringConvertible {
    let text: SecureBytes

    /// Calls `body` with the key's printable text (ASCII: nine hyphen-separated groups of four).
    public func withFormattedText<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try text.withUnsafeBytes(body)
    }

    /// The printable text as a String (which cannot be wiped: prefer `withFormattedText`).
    public var formattedText: String {
        text.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// A description that never shows the key.
    public var description: String { "RecoveryKey(<redacted>)" }
}
