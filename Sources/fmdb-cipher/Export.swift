import ArgumentParser
import FMDB
import Foundation

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy an encrypted database into a new one with another key or other cipher settings.",
        discussion: """
            Written to a temporary file beside DEST, verified with the new key and settings, and renamed into \
            place; SRC is not changed. A DEST with a non-default --new-page-size or --new-kdf-iter needs the \
            same settings to open (here --cipher-page-size / --kdf-iter; in the sqlcipher shell \
            PRAGMA cipher_page_size / PRAGMA kdf_iter after PRAGMA key).

            SQLCipher 4 compatible files (HMAC-SHA512, PBKDF2-HMAC-SHA512 x 256000, 4096-byte pages) cannot be \
            written by the linked SQLCipher 3.4.1; --sqlcipher4 is refused with an explanation.

            Examples:
              OLD=... NEW=... fmdb-cipher export a.db b.db --key-env OLD --new-key-env NEW
              fmdb-cipher export a.db b.db --key-env OLD --new-key-env NEW --new-page-size 4096
            """
    )

    @Argument(help: "The encrypted database to read.") var source: String
    @Argument(help: "The encrypted database to create.") var destination: String
    @OptionGroup var key: KeyOptions
    @OptionGroup var newKey: NewKeyOptions
    @Option(name: .customLong("new-page-size"), help: ArgumentHelp("Cipher page size of DEST (default 1024).", valueName: "BYTES"))
    var newPageSize: Int?
    @Option(name: .customLong("new-kdf-iter"), help: ArgumentHelp("SQLCipher KDF iterations of DEST for passphrase keys (default 64000).", valueName: "N"))
    var newKDFIterations: Int?
    @Option(name: .customLong("unsafe-new-kdf-iter"), help: ArgumentHelp(
        "KDF iterations of DEST below the 64000 floor (weak: only for a reader that needs it).", valueName: "N"))
    var unsafeNewKDFIterations: Int?
    @Flag(name: .customLong("sqlcipher4"), help: "Write SQLCipher 4 compatible settings (not supported by SQLCipher 3.4.1).")
    var sqlcipher4 = false
    @Flag(help: "Replace DEST if it exists.") var force = false
    @Flag(help: "No progress output.") var quiet = false

    func run() throws {
        try runReportingErrors {
            if sqlcipher4 {
                throw CLIError.usage(
                    "SQLCipher 4 settings need HMAC-SHA512 page authentication, which the linked SQLCipher "
                        + "\(FMDBCipherVersion.sqlcipher) cannot write; open SQLCipher 3 files in SQLCipher 4 with PRAGMA cipher_compatibility = 3"
                )
            }
            let settings = try KDFFloor.newFileSettings(
                pageSize: newPageSize, iterations: newKDFIterations, unsafeIterations: unsafeNewKDFIterations,
                option: "--new-kdf-iter", unsafeOption: "--unsafe-new-kdf-iter")
            let kind = try DatabaseFiles.requireInput(source)
            if kind == .plaintext { throw CLIError("\(source): is a plaintext database: use encrypt", code: Exit.wrongKey) }
            let reader = KeyReader()
            let material = try reader.read(key.source, what: "key for \(source)")
            let provider = try key.kdf.provider(material)
            let newMaterial = try reader.read(newKey.source, what: "new key for \(destination)", confirm: true)
            let newProvider = try (newKey.newKDF ?? key.kdf).provider(newMaterial)
            try DatabaseCopy(
                source: source, sourceProvider: provider, sourceSettings: key.settings,
                destination: destination, destinationProvider: newProvider,
                settings: settings,
                force: force, quiet: quiet, verb: "export"
            ).run()
            if !quiet { FileHandle.standardError.write(Data("exported \(source) → \(destination)\n".utf8)) }
        }
    }
}
