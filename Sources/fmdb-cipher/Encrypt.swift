import ArgumentParser
import FMDB
import Foundation

struct Encrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encrypt a plaintext SQLite database into a new encrypted one.",
        discussion: """
            The copy is written to a temporary file beside DEST, verified (integrity check, same tables and \
            row counts) and renamed into place, so an interrupted run never leaves a half file at DEST. \
            user_version and application_id are copied. SRC is not changed.

            Examples:
              DB_KEY=... fmdb-cipher encrypt plain.db secret.db --key-env DB_KEY
              fmdb-cipher encrypt plain.db secret.db --key-file /run/secrets/db-key --kdf pbkdf2
            """
    )

    @Argument(help: "The plaintext database to read.") var source: String
    @Argument(help: "The encrypted database to create.") var destination: String
    @OptionGroup var key: KeyOptions
    @Option(name: .customLong("page-size"), help: ArgumentHelp("Cipher page size of the new file (default: the linked SQLCipher's, 1024 on 3.x, 4096 on 4.x).", valueName: "BYTES"))
    var pageSize: Int?
    @Option(name: .customLong("unsafe-kdf-iter"), help: ArgumentHelp(
        "KDF iterations of the new file below the 64000 floor (weak: only for a reader that needs it).", valueName: "N"))
    var unsafeKDFIterations: Int?
    @Flag(help: "Replace DEST if it exists.") var force = false
    @Flag(help: "No progress output.") var quiet = false

    func run() throws {
        try runReportingErrors {
            let settings = try KDFFloor.newFileSettings(
                pageSize: pageSize ?? key.cipherPageSize, iterations: key.kdfIterations, unsafeIterations: unsafeKDFIterations,
                option: "--kdf-iter", unsafeOption: "--unsafe-kdf-iter")
            let kind = try DatabaseFiles.requireInput(source)
            switch kind {
            case .plaintext: break
            case .empty: throw CLIError("\(source): is empty, not a database", code: Exit.wrongKey)
            default: throw CLIError("\(source): is not a plaintext SQLite database (already encrypted? use export)", code: Exit.wrongKey)
            }
            let material = try KeyReader().read(key.source, what: "key for \(destination)", confirm: true)
            let provider = try key.kdf.provider(material)
            try DatabaseCopy(
                source: source, sourceProvider: nil, sourceSettings: CipherSettings(),
                destination: destination, destinationProvider: provider,
                settings: settings,
                force: force, quiet: quiet, verb: "encrypt"
            ).run()
            if !quiet { FileHandle.standardError.write(Data("encrypted \(source) → \(destination)\n".utf8)) }
        }
    }
}
