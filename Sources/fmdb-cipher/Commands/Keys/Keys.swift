import ArgumentParser
import FMDB
import Foundation

/// `fmdb-cipher keys ...`: key slots (see `KeySlots` in the library).
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Key slots: several passphrases, raw keys and a recovery key for one database; change one in milliseconds.",
        discussion: """
            A slotted database is encrypted with a random data key that is never shown or stored in clear. \
            Each way to open it is a slot in DB-keyslots (keep it with the database: without it the database \
            cannot be opened). Changing a passphrase rewrites one slot, not the database. Every command opens a \
            slotted database through its slots without --kdf: the key is tried as a passphrase, a raw key and \
            a recovery key, in that order, against the slot kinds DB-keyslots holds. A slot's key is named \
            --kdf slot (a passphrase), slot-raw or slot-recovery, here and in the other commands; a new slot's \
            --new-kdf slot or slot-raw. \
            export and migrate (opened through a slot, no --new-key-*) and rekey --data-key --backup carry the \
            slot file to the copy; encrypt --kdf slot [--recovery] makes a slotted database from a plaintext one.

            Examples:
              fmdb-cipher keys init app.db --recovery                  # prompts for the first passphrase
              fmdb-cipher keys add app.db --key-env ADMIN --new-key-env OPS
              fmdb-cipher keys change app.db --key-env OLD --new-key-env NEW
              fmdb-cipher keys list app.db
              fmdb-cipher sql app.db --key-env OPS "SELECT count(*) FROM t"
              fmdb-cipher rekey --data-key app.db --key-env ADMIN --slot-key-file ops.pass --slot-key-file recovery.txt
            """,
        subcommands: [
            KeysInit.self, KeysAdd.self, KeysRecovery.self, KeysRemove.self, KeysList.self, KeysChange.self,
            KeysExportRaw.self,
        ]
    )
}
