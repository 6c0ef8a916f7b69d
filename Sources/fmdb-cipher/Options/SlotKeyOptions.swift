import FMDB
import ArgumentParser

/// A kind of slot key as every command spells it: the names of a key that opens a slot (`--kdf slot`,
/// `slot-raw`, `slot-recovery`).
protocol SlotKindArgument: ExpressibleByArgument, RawRepresentable<String>, CaseIterable {
    /// The kind as the `KDF` the other commands use.
    var kdf: KDF { get }
}

/// `--cipher-page-size` and `--kdf-iter`, which the commands that open a database take: a usage error in
/// `keys`, saying where they belong (a slot change rewrites no page).
struct IgnoredCipherOptions: ParsableArguments {
    @Option(name: .customLong("cipher-page-size"), help: .hidden) var pageSize: String?
    @Option(name: .customLong("kdf-iter"), help: .hidden) var iterations: String?

    func validate() throws {
        for (option, value) in [("--cipher-page-size", pageSize), ("--kdf-iter", iterations)] where value != nil {
            throw ValidationError(
                "keys takes no \(option): a slot change rewrites no page, and keys init makes a database with its "
                    + "format's defaults; give \(option) to the commands that open the database (sql, info, export ...)"
            )
        }
    }
}

/// A key that unlocks an existing slot: a passphrase, a raw key or a recovery key.
enum SlotKeyKind: String, SlotKindArgument {
    case slot
    case slotRaw = "slot-raw"
    case slotRecovery = "slot-recovery"

    var kdf: KDF {
        switch self {
        case .slot: return .slot
        case .slotRaw: return .slotRaw
        case .slotRecovery: return .slotRecovery
        }
    }
}

/// The key of a new slot: a passphrase or a raw key (recovery keys are generated, `keys recovery`).
enum NewSlotKeyKind: String, SlotKindArgument {
    case slot
    case slotRaw = "slot-raw"

    var kdf: KDF { self == .slotRaw ? .slotRaw : .slot }
}

/// The key that unlocks a slot of the database a `keys` command changes.
struct SlotKeyOptions: ParsableArguments {
    @OptionGroup var from: KeySourceOptions

    @Option(
        name: .customLong("kdf"),
        help: """
            The kind of key: slot (a passphrase), slot-raw (32 bytes or 64 hex digits) or slot-recovery \
            (default: found from the slot kinds the slot file holds).
            """)
    var kind: SlotKeyKind?

    var kdf: KDF { kind?.kdf ?? .slot }
    var source: KeySource? { from.source }

    @OptionGroup var ignored: IgnoredCipherOptions

    /// How `material` unlocks a slot of `database`: as --kdf says, else found from the slot kinds present
    /// (`SlotDiscovery`). A slot file group or others can change, or owned by another user, is refused (exit 66).
    func kdf(opening database: String, with material: KeyMaterial) throws -> KDF {
        try SlotDiscovery.requireTrusted(database)
        if let kind { return kind.kdf }
        return try SlotDiscovery.kind(of: material, on: database)
    }
}

/// The key of the first slot `keys init` makes, as `encrypt --kdf slot|slot-raw` spells it.
struct FirstSlotKeyOptions: ParsableArguments {
    @OptionGroup var from: KeySourceOptions

    @Option(
        name: .customLong("kdf"),
        help: "The kind of key of the first slot: slot (a passphrase) or slot-raw (32 bytes or 64 hex digits).")
    var kind: NewSlotKeyKind = .slot

    @OptionGroup var ignored: IgnoredCipherOptions

    var kdf: KDF { kind.kdf }
    var source: KeySource? { from.source }
}

/// The key of a new slot (`keys add`, `keys change`).
struct NewSlotKeyOptions: ParsableArguments {
    @OptionGroup var from: NewKeySourceOptions

    @Option(
        name: .customLong("new-kdf"),
        help: "The kind of the new key: slot (a passphrase) or slot-raw (32 bytes or 64 hex digits).")
    var kind: NewSlotKeyKind = .slot

    var kdf: KDF { kind.kdf }
    var source: KeySource? { from.source }
}
