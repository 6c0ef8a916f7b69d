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

            --format 3 or 4 writes DEST in SQLCipher 3's or 4's format (default: the linked SQLCipher's), \
            for a peer on the other line: a format-3 file opens in a SQLCipher 4 shell after \
            PRAGMA cipher_compatibility = 3. SQLCipher 3.x cannot write format 4 (refused, exit 64).

            Examples:
              OLD=... NEW=... fmdb-cipher export a.db b.db --key-env OLD --new-key-env NEW
              fmdb-cipher export a.db b.db --key-env OLD --new-key-env NEW --new-page-size 4096
              fmdb-cipher export a.db for-sqlcipher3.db --key-env OLD --new-key-env NEW --format 3
            """
    )

    @Argument(help: "The encrypted database to read.") var source: String
    @Argument(help: "The encrypted database to create.") var destination: String
    @OptionGroup var key: KeyOptions
    @OptionGroup var newKey: NewKeyOptions
    @Option(name: .customLong("new-page-size"), help: ArgumentHelp("Cipher page size of DEST (default: the format's, 1024 for 3, 4096 for 4).", valueName: "BYTES"))
    var newPageSize: Int?
    @Option(name: .customLong("new-kdf-iter"), help: ArgumentHelp("SQLCipher KDF iterations of DEST for passphrase keys (default: the format's, 64000 for 3, 256000 for 4).", valueName: "N"))
    var newKDFIterations: Int?
    @Option(name: .customLong("unsafe-new-kdf-iter"), help: ArgumentHelp(
        "KDF iterations of DEST below the 64000 floor (weak: only for a reader that needs it).", valueName: "N"))
    var unsafeNewKDFIterations: Int?
    @Option(help: ArgumentHelp("File format of DEST: 3 or 4 (SQLCipher 3 or 4; default: the linked SQLCipher's).", valueName: "N"))
    var format: Int?
    @Flag(name: .customLong("sqlcipher4"), help: "Same as --format 4.")
    var sqlcipher4 = false
    @Flag(help: "Replace DEST if it exists.") var force = false
    @Flag(help: "No progress output.") var quiet = false

    func run() throws {
        try runReportingErrors {
            let destinationFormat = try Self.format(sqlcipher4 ? 4 : format)
            let settings = try KDFFloor.newFileSettings(
                pageSize: newPageSize, iterations: newKDFIterations, unsafeIterations: unsafeNewKDFIterations,
                option: "--new-kdf-iter", unsafeOption: "--unsafe-new-kdf-iter", format: destinationFormat)
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

    /// `--format N` as a CipherFormat (nil: the linked default); usage errors for what cannot be written here.
    static func format(_ number: Int?) throws -> CipherFormat? {
        guard let number else { return nil }
        guard number == 3 || number == 4, let format = CipherFormat(rawValue: number) else {
            throw CLIError.usage("--format must be 3 or 4 (got \(number))")
        }
        guard format.isSupportedByLinkedSQLCipher else {
            throw CLIError.usage(
                "SQLCipher 4's format needs HMAC-SHA512 page authentication, which the linked SQLCipher "
                    + "\(FMDBCipherVersion.sqlcipher) cannot write; install SQLCipher 4 (see README), or open SQLCipher 3 "
                    + "files in SQLCipher 4 with PRAGMA cipher_compatibility = 3"
            )
        }
        return format
    }
}
