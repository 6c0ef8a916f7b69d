import FMDB
import ArgumentParser

/// A kind of slot key as `keys` spells it: the names every command uses for a key that opens a slot
/// (`--kdf slot`, `slot-raw`, `slot-recovery`). `passphrase` and `raw`, the spellings of an earlier
/// release in `keys`, still parse, with a deprecation warning, and are not listed in help or completions.
protocol SlotKindArgument: ExpressibleByArgument, RawRepresentable<String>, CaseIterable {
    /// The kind as the `KDF` the other commands use.
    var kdf: KDF { get }
    /// The listed kind an old spelling stands for (nil: this is a listed kind, or a refused one).
    var replacing: Self? { get }
    /// Whether this is a spelling of an earlier release that named no kind of slot key here: refused (exit 64)
    /// with what to use.
    var isRefused: Bool { get }
}

extension SlotKindArgument {
    static var allValueStrings: [String] {
        allCases.filter { $0.replacing == nil && !$0.isRefused }.map(\.rawValue)
    }

    /// Warns about a deprecated spelling; refuses (a usage error) one that is not a kind of slot key, saying
    /// what to use.
    func checkSpelling(option: String) throws {
        if isRefused {
            throw ValidationError(
                "\(option) \(rawValue) is not a kind of slot key: a passphrase slot is \(option) slot (its KDF is "
                    + "--slot-kdf scrypt or pbkdf2), a raw-key slot \(option) slot-raw")
        }
        if let replacing { Deprecation.warn("\(option) \(rawValue)", use: "\(option) \(replacing.rawValue)") }
    }
}

/// `--cipher-page-size` and `--kdf-iter`, which `keys` took in an earlier release and ignored: a usage error
/// saying where they belong.
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
/// `pbkdf2`, `scrypt` and `pbkdf2-sqlcipher`, which an earlier release took here, named a passphrase (the
/// slot's own KDF derives it): deprecated spellings of `slot`.
enum SlotKeyKind: String, SlotKindArgument {
    case slot
    case slotRaw = "slot-raw"
    case slotRecovery = "slot-recovery"
    case oldPassphrase = "passphrase"
    case oldRaw = "raw"
    case oldPBKDF2 = "pbkdf2"
    case oldScrypt = "scrypt"
    case oldPBKDF2SQLCipher = "pbkdf2-sqlcipher"

    var kdf: KDF {
        switch self {
        case .slot, .oldPassphrase, .oldPBKDF2, .oldScrypt, .oldPBKDF2SQLCipher: return .slot
        case .slotRaw, .oldRaw: return .slotRaw
        case .slotRecovery: return .slotRecovery
        }
    }

    var replacing: SlotKeyKind? {
        switch self {
        case .oldPassphrase, .oldPBKDF2, .oldScrypt, .oldPBKDF2SQLCipher: return .slot
        case .oldRaw: return .slotRaw
        default: return nil
        }
    }

    var isRefused: Bool { false }
}

/// The key of a new slot: a passphrase or a raw key (recovery keys are generated, `keys recovery`).
/// `pbkdf2`, `scrypt` and `pbkdf2-sqlcipher`, taken by an earlier release, made a passphrase slot whose KDF
/// was `--slot-kdf`'s, not theirs: refused, with what to use, rather than kept.
enum NewSlotKeyKind: String, SlotKindArgument {
    case slot
    case slotRaw = "slot-raw"
    case oldPassphrase = "passphrase"
    case oldRaw = "raw"
    case oldPBKDF2 = "pbkdf2"
    case oldScrypt = "scrypt"
    case oldPBKDF2SQLCipher = "pbkdf2-sqlcipher"

    var kdf: KDF { self == .slotRaw || self == .oldRaw ? .slotRaw : .slot }

    var replacing: NewSlotKeyKind? {
        switch self {
        case .oldPassphrase: return .slot
        case .oldRaw: return .slotRaw
        default: return nil
        }
    }

    var isRefused: Bool { self == .oldPBKDF2 || self == .oldScrypt || self == .oldPBKDF2SQLCipher }
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

    func validate() throws { try kind?.checkSpelling(option: "--kdf") }

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

    func validate() throws { try kind.checkSpelling(option: "--kdf") }
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

    func validate() throws { try kind.checkSpelling(option: "--new-kdf") }
}
