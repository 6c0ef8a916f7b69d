import FMDB
import ArgumentParser

/// A kind of slot key as `keys` spells it: the names every command uses for a key that opens a slot
/// (`--kdf slot`, `slot-raw`, `slot-recovery`). `passphrase` and `raw`, the spellings of an earlier
/// release in `keys`, still parse, with a deprecation warning, and are not listed in help or completions.
protocol SlotKindArgument: ExpressibleByArgument, RawRepresentable<String>, CaseIterable {
    /// The kind as the `KDF` the other commands use.
    var kdf: KDF { get }
    /// The listed kind an old spelling stands for (nil: this is a listed kind).
    var replacing: Self? { get }
}

extension SlotKindArgument {
    static var allValueStrings: [String] { allCases.filter { $0.replacing == nil }.map(\.rawValue) }

    func warnIfDeprecated(option: String) {
        if let replacing { Deprecation.warn("\(option) \(rawValue)", use: "\(option) \(replacing.rawValue)") }
    }
}

/// A key that unlocks an existing slot: a passphrase, a raw key or a recovery key.
enum SlotKeyKind: String, SlotKindArgument {
    case slot
    case slotRaw = "slot-raw"
    case slotRecovery = "slot-recovery"
    case oldPassphrase = "passphrase"
    case oldRaw = "raw"

    var kdf: KDF {
        switch self {
        case .slot, .oldPassphrase: return .slot
        case .slotRaw, .oldRaw: return .slotRaw
        case .slotRecovery: return .slotRecovery
        }
    }

    var replacing: SlotKeyKind? {
        switch self {
        case .oldPassphrase: return .slot
        case .oldRaw: return .slotRaw
        default: return nil
        }
    }
}

/// The key of a new slot: a passphrase or a raw key (recovery keys are generated, `keys recovery`).
enum NewSlotKeyKind: String, SlotKindArgument {
    case slot
    case slotRaw = "slot-raw"
    case oldPassphrase = "passphrase"
    case oldRaw = "raw"

    var kdf: KDF { self == .slotRaw || self == .oldRaw ? .slotRaw : .slot }

    var replacing: NewSlotKeyKind? {
        switch self {
        case .oldPassphrase: return .slot
        case .oldRaw: return .slotRaw
        default: return nil
        }
    }
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

    func validate() throws { kind?.warnIfDeprecated(option: "--kdf") }

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

    var kdf: KDF { kind.kdf }
    var source: KeySource? { from.source }

    func validate() throws { kind.warnIfDeprecated(option: "--kdf") }
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

    func validate() throws { kind.warnIfDeprecated(option: "--new-kdf") }
}
