import Foundation

/// How a passphrase slot turns its passphrase into a key-encryption key. Raw and recovery keys need no
/// stretching (they are random): their slots use HMAC-SHA256 over the slot's salt.
///
/// ```swift
/// try KeySlots.addSlot(to: path, unlockingWith: admin, newSecret: .passphrase("ops"), kdf: .pbkdf2SHA512())
/// ```
public struct KeySlotKDF: Sendable, Equatable {
    enum Algorithm: Sendable, Equatable {
        case scrypt(n: UInt64, r: UInt64, p: UInt64)
        case pbkdf2SHA512(iterations: Int)
    }

    let algorithm: Algorithm
    let allowsWeak: Bool

    /// The default: scrypt N=2^15, r=8, p=1 (32 MiB, about 0.1 s here).
    public static let `default` = KeySlotKDF.scrypt()

    /// The lowest PBKDF2-HMAC-SHA512 iteration count accepted without `unsafe`.
    public static let minimumPBKDF2Iterations = 64_000
    /// The lowest scrypt N accepted without `unsafe`.
    public static let minimumScryptN: UInt64 = 1 << 14

    /// scrypt with cost `n` (a power of two, 2^14 to 2^22), block size `r`, parallelism `p` (each 1 to 65535),
    /// with N·r·p at most 2^25 (the work of N = 2^22, r = 8, p = 1): a slot read from disk that asks for more
    /// is damaged (`SQLITE_CORRUPT`), so no slot file can make an unlock run for hours.
    public static func scrypt(n: UInt64 = 1 << 15, r: UInt64 = 8, p: UInt64 = 1) -> KeySlotKDF {
        KeySlotKDF(algorithm: .scrypt(n: n, r: r, p: p), allowsWeak: false)
    }

    /// PBKDF2-HMAC-SHA512 with `iterations` (64,000 to 10,000,000; default 256,000).
    public static func pbkdf2SHA512(iterations: Int = 256_000) -> KeySlotKDF {
        KeySlotKDF(algorithm: .pbkdf2SHA512(iterations: iterations), allowsWeak: false)
    }

    /// PBKDF2-HMAC-SHA512 with any iteration count from 1,000 (the lowest a slot file may hold). For tests
    /// only: weak counts make passphrases cheap to guess from a copy of the slot file.
    public static func unsafePBKDF2SHA512(iterations: Int) -> KeySlotKDF {
        KeySlotKDF(algorithm: .pbkdf2SHA512(iterations: iterations), allowsWeak: true)
    }

    func validate() throws {
        switch algorithm {
        case .scrypt(let n, let r, let p):
            guard allowsWeak || n >= Self.minimumScryptN else {
                throw FMDatabaseError.misuse("scrypt n=\(n) is below the floor of \(Self.minimumScryptN).")
            }
            // The same bounds every slot read from disk is checked against.
            if let problem = KeySlotKDFBounds.scryptProblem(n: n, r: r, p: p) {
                throw FMDatabaseError.misuse("Unusable scrypt parameters: \(problem).")
            }
        case .pbkdf2SHA512(let iterations):
            guard iterations >= KeySlotKDFBounds.pbkdf2Iterations.lowerBound,
                iterations <= KeySlotKDFBounds.pbkdf2Iterations.upperBound
            else {
                throw FMDatabaseError.misuse("PBKDF2 iterations must be between 1,000 and 10,000,000.")
            }
            guard allowsWeak || iterations >= Self.minimumPBKDF2Iterations else {
                throw FMDatabaseError.misuse(
                    "PBKDF2 iterations \(iterations) are below the floor of \(Self.minimumPBKDF2Iterations); "
                        + "unsafePBKDF2SHA512(iterations:) is for tests only."
                )
            }
        }
    }
}
