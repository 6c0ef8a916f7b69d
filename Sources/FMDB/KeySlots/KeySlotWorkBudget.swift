import Foundation

/// The key-derivation work an unlock may spend trying the slots of a slot file one after another (no slot id
/// given): the slots of the secret's kind are summed before any is tried, and a file whose sum exceeds the
/// budget is refused with none tried (`SQLITE_PERM`, ``FMDatabaseError/exceedsKeySlotWorkBudget``).
///
/// Why: whoever can write to a database's directory can put a slot file beside it (copying the database's
/// public salt from its header) whose slots each ask for the most work a slot may (`KeySlotKDFBounds`): 64 of
/// them would make every open run for many minutes. With the budget, such a file costs at most the work of
/// the most expensive single slot the library accepts.
///
/// Units: scrypt costs N·r·p; PBKDF2-HMAC-SHA512 costs 2 per iteration (one iteration measured about 1.5
/// scrypt units of CPU here, rounded up); raw and recovery keys' HMAC costs nothing. The budget is 2^25, the
/// work of one scrypt slot at the bound (N = 2^22, r = 8, p = 1), so every single slot the library accepts,
/// and every file of up to 64 slots (the most a file may hold) at the library's defaults — scrypt N = 2^15,
/// r = 8 (2^18 each; 64 of them use half the budget) or PBKDF2 x 256,000 (512,000 each; 64 of them
/// 32,768,000) — is tried as before. A file beyond it opens with a slot id (one slot, one derivation).
enum KeySlotWorkBudget {
    /// The most work one unlock may spend trying slots in turn.
    static var limit: UInt64 { limitInThisTask ?? 1 << 25 }

    /// A smaller limit for the current task (tests: files over it are made with cheap KDFs).
    @TaskLocal static var limitInThisTask: UInt64?
    /// The cost of one PBKDF2-HMAC-SHA512 iteration, in scrypt N·r·p units.
    static let pbkdf2UnitsPerIteration: UInt64 = 2

    /// The work of deriving a key-encryption key with `kdf` (bounds-checked parameters: no overflow).
    static func cost(of kdf: KeySlotFile.KDFParameters) -> UInt64 {
        switch kdf.name {
        case "scrypt":
            let n = kdf.n ?? 0
            let rp = (kdf.r ?? 0).multipliedReportingOverflow(by: kdf.p ?? 0)
            let work = n.multipliedReportingOverflow(by: rp.partialValue)
            return rp.overflow || work.overflow ? UInt64.max : work.partialValue
        case "pbkdf2-sha512":
            let iterations = UInt64(clamping: max(kdf.iterations ?? 0, 0))
            let work = iterations.multipliedReportingOverflow(by: pbkdf2UnitsPerIteration)
            return work.overflow ? UInt64.max : work.partialValue
        default:
            return 0
        }
    }

    /// The work of trying every slot of `kind` in `file`, and how many there are.
    static func total(_ file: KeySlotFile, kind: KeySlotKind) -> (work: UInt64, slots: Int) {
        let slots = file.body.slots.filter { $0.kind == kind.rawValue }
        var total: UInt64 = 0
        for slot in slots {
            let sum = total.addingReportingOverflow(cost(of: slot.kdf))
            total = sum.overflow ? UInt64.max : sum.partialValue
        }
        return (total, slots.count)
    }

    /// Throws (`SQLITE_MISUSE`) when a slot just made or changed in `file` puts the slots of `kind` over the
    /// budget: the library never writes a file its own unlock would refuse to try in turn.
    static func refuseGrowth(_ file: KeySlotFile, kind: KeySlotKind) throws {
        guard total(file, kind: kind).work > limit else { return }
        throw FMDatabaseError.misuse(
            "With this slot the \(kind.rawValue) slots' key derivations together would exceed the work one unlock "
                + "may spend trying slots in turn (that of one scrypt slot of N=2^22, r=8): nothing was written. "
                + "Use a cheaper KDF (the default), or remove a slot first.")
    }

    /// Throws when trying every slot of `kind` in `file` (at `slotPath`) would exceed the budget.
    static func check(_ file: KeySlotFile, kind: KeySlotKind, slotPath: String) throws {
        let (work, count) = total(file, kind: kind)
        guard work > limit else { return }
        throw FMDatabaseError(
            code: SQLITE_PERM,
            message:
                "The key slot file \(slotPath) holds \(count) \(kind.rawValue) slots whose key derivations together "
                + "exceed the work one unlock may spend trying slots in turn (that of one scrypt slot of N=2^22, r=8): "
                + "none was tried. If the file belongs to this database, name the slot to try "
                + "(KeySlotKeyProvider(secret:slotID:), fmdb-cipher --slot ID); if not, move it away.",
            marks: [.keySlotWorkBudgetExceeded], keySlotFile: slotPath)
    }

    /// Counts the slot unlocks' key derivations and their work (tests: `KeySlotWorkBudget.$meter.withValue`).
    final class Meter: Sendable {
        private let state = Protected((derivations: 0, work: UInt64(0)))

        var derivations: Int { state.withLock { $0.derivations } }
        var work: UInt64 { state.withLock { $0.work } }

        func record(_ kdf: KeySlotFile.KDFParameters) {
            state.withLock {
                $0.derivations += 1
                $0.work = $0.work.addingReportingOverflow(KeySlotWorkBudget.cost(of: kdf)).partialValue
            }
        }
    }

    /// The meter of the current task, if any: every slot unlock's key derivation is recorded in it.
    @TaskLocal static var meter: Meter?
}
