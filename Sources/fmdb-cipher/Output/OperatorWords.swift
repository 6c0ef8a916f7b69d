import FMDB
import Foundation

/// The library's messages are written for programs that call it, and some name its Swift API ("use
/// setKey(using:)"). The tool passes them on in an operator's terms: what to run or which option to give.
/// Each library phrase that names API is replaced by the tool's own; a test runs the commands that meet them
/// and checks that no Swift name is left.
enum OperatorWords {
    /// A library phrase, and what the tool says in its place.
    static let replacements: [(library: String, tool: String)] = [
        (
            "Use setKey(using:) to key a connection and rekey(using:) (or fmdb-cipher rekey) to change the key.",
            "Give the key with --key-env, --key-file, --key-stdin or --key-credential, and change it with "
                + "fmdb-cipher rekey."
        ),
        (
            "Use CipherSettings (or fmdb-cipher's options) for one database.",
            "Give one database's settings with --cipher-page-size and --kdf-iter."
        ),
        (
            "Use CipherSettings(pageSize:) when keying a new database, or fmdb-cipher export --new-cipher-page-size.",
            "Convert the database with fmdb-cipher export --new-cipher-page-size."
        ),
        (
            "Use CipherSettings with setKey(using:settings:) or attachDatabase, or fmdb-cipher export to convert a "
                + "database.",
            "Give the database's settings with --cipher-page-size and --kdf-iter, or convert it with fmdb-cipher "
                + "export."
        ),
        (
            "Use attachDatabase(atPath:schema:keyProvider:), which says in code whether the attached file is "
                + "encrypted.",
            "Copy between databases with fmdb-cipher export, encrypt or decrypt."
        ),
        (
            "Key the connection right after open(), before any other statement, or use setKey(using:).",
            "Give the key with --key-env, --key-file, --key-stdin or --key-credential, not in SQL."
        ),
        (
            "Key the connection right after open(), or use setKey(using:).",
            "Give the key with --key-env, --key-file, --key-stdin or --key-credential, not in SQL."
        ),
        (
            "Give a key of one or more characters, or use setKey(using:).",
            "Give the key with --key-env, --key-file, --key-stdin or --key-credential, not in SQL."
        ),
        (
            "Use setKey(using:) with a RawKeyProvider.",
            "Give a raw key with --kdf raw and --key-env, --key-file or --key-stdin, not in SQL."
        ),
        (
            "Key it again (setKey(using:)), or close it.",
            "Run the command again with the database's key."
        ),
        (
            "(create one with KeySlots.createDatabase or fmdb-cipher keys init)",
            "(create one with fmdb-cipher keys init)"
        ),
        (
            "a slotted database is made with KeySlots.createDatabase or fmdb-cipher keys init, a copy through "
                + "KeySlotKeyProvider.creatingDatabase(at:).",
            "a slotted database is made with fmdb-cipher keys init, a copy of one with fmdb-cipher export."
        ),
        (
            "Change a slot with KeySlots.changeSlot, or the data key itself with KeySlots.rotateDataKey.",
            "Change a slot with fmdb-cipher keys change, or the data key itself with fmdb-cipher rekey --data-key."
        ),
        ("open it through one (a KeySlotKeyProvider)", "open it through one (--kdf slot, slot-raw or slot-recovery)"),
        ("(KeySlotKeyProvider(secret:slotID:), fmdb-cipher --slot ID)", "(--slot ID)"),
        (
            "Open the file with its own FMDatabase and setKey(using:settings:), or convert it",
            "Open the file on its own (with --cipher-page-size and --kdf-iter), or convert it"
        ),
    ]

    /// `message` with every library phrase that names Swift API in the tool's words.
    static func rewrite(_ message: String) -> String {
        replacements.reduce(message) { $0.replacingOccurrences(of: $1.library, with: $1.tool) }
    }
}
