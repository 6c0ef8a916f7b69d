import CToolSupport
import FMDB
import Foundation

/// What a path holds, read without a key: the library's `FMDatabase.inspectFile(atPath:)`.
typealias FileKind = FMDatabaseFileKind

extension FMDatabaseFileKind {
    init(path: String) {
        self = FMDatabase.inspectFile(atPath: path)
    }

    /// Whether the header says encrypted (or not a database at all): a plaintext header included.
    var isEncrypted: Bool {
        switch self {
        case .encrypted, .encryptedWithPlaintextHeader: return true
        default: return false
        }
    }

    /// The plaintext header's size, for a SQLCipher file that keeps one (never a plaintext database).
    var plaintextHeaderSize: Int? {
        if case .encryptedWithPlaintextHeader(let size) = self { return size }
        return nil
    }

    /// How every command names a file with a plaintext header.
    static func plaintextHeaderDescription(_ size: Int) -> String {
        "encrypted, with a plaintext header of \(size) bytes (as iOS apps in shared containers write)"
    }
}
