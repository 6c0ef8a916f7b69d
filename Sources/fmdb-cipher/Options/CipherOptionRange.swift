import FMDB
import Foundation

/// The range check of every number option that reaches SQLCipher's PRAGMA text (`--cipher-page-size`,
/// `--kdf-iter`, `--new-cipher-page-size`, `--new-kdf-iter`, the `--unsafe-…` spellings and the old names): the
/// library's own (`CipherSettings.validatePageSize` / `validateKDFIterations`: the C int SQLCipher's `atoi`
/// reads, a power of two from 512 to 65536 for page sizes), as a usage error (exit 64) naming the option,
/// before any key is read. A number outside it would reach SQLCipher as another number.
enum CipherOptionRange {
    static func check(pageSize: Int?, option: String) throws {
        guard let pageSize else { return }
        try usage(option) { try CipherSettings.validatePageSize(pageSize) }
    }

    static func check(iterations: Int?, option: String) throws {
        guard let iterations else { return }
        try usage(option) { try CipherSettings.validateKDFIterations(iterations) }
    }

    private static func usage(_ option: String, _ check: () throws -> Void) throws {
        do {
            try check()
        } catch {
            throw CLIError.usage("\(option): \((error as NSError).localizedDescription)")
        }
    }
}
