import FMDB
import Foundation

/// The KDF floor for files the tool writes: `--kdf-iter` / `--new-kdf-iter` below
/// `CipherSettings.minimumKDFIterations` are refused (exit 64) before any key is read; the
/// `--unsafe-…` spelling writes them anyway. Opening a file with its own low count (`--kdf-iter` on
/// the file being read) is not affected.
enum KDFFloor {
    /// The settings of a new file from `pageSize` and either the safe or the unsafe iteration option.
    static func newFileSettings(
        pageSize: Int?,
        pageSizeOption: String,
        iterations: Int?,
        unsafeIterations: Int?,
        option: String,
        unsafeOption: String,
        format: CipherFormat? = nil
    ) throws -> CipherSettings {
        try CipherOptionRange.check(pageSize: pageSize, option: pageSizeOption)
        try CipherOptionRange.check(iterations: iterations, option: option)
        try CipherOptionRange.check(iterations: unsafeIterations, option: unsafeOption)
        if let unsafeIterations {
            guard iterations == nil else { throw CLIError.usage("give \(option) or \(unsafeOption), not both") }
            return CipherSettings(pageSize: pageSize, unsafeKDFIterations: unsafeIterations, format: format)
        }
        if let iterations, iterations < CipherSettings.minimumKDFIterations {
            throw CLIError.usage(
                "\(option) \(iterations) is below the floor of \(CipherSettings.minimumKDFIterations) iterations, "
                    + "which makes the passphrase cheap to guess; use \(unsafeOption) \(iterations) if a reader really "
                    + "needs it"
            )
        }
        return CipherSettings(pageSize: pageSize, kdfIterations: iterations, format: format)
    }
}
