import ArgumentParser
import FMDB
import Foundation

/// Reads keys with the library's `KeyMaterial.read(from:)` (getenv, read(2), the terminal with echo
/// off, into wiped memory), adding the tool's prompts and exit codes.
final class KeyReader {
    /// How many times a new key typed twice may differ before the command gives up.
    static let confirmationAttempts = 3

    /// The key from `source` (or a prompt when nil and standard input is a terminal). `newKey`: the key is
    /// given with the `--new-key-*` options, which a missing key's message names.
    func read(_ source: KeySource?, what: String, confirm: Bool = false, newKey: Bool = false) throws -> KeyMaterial {
        switch source ?? .prompt {
        case .environment(let name):
            if getenv(name) == nil, EnvironmentName.isShown(name) {
                throw CLIError.usage("the environment variable \(name) (the \(what)) is not set")
            }
            return try library(.environment(name: name), what: what)
        case .file(let path):
            return try library(.file(path: path), what: what)
        case .credential(let name):
            let material: KeyMaterial
            do {
                material = try SystemdCredentialKeyProvider.read(credential: name).trimmingTrailingNewline()
            } catch {
                throw CLIError.from(error, context: "the \(what)")
            }
            guard !material.isEmpty else { throw CLIError.usage("the \(what) is empty") }
            return material
        case .standardInput:
            // On a terminal, the same as the prompt: no echo.
            let terminal = isatty(STDIN_FILENO) == 1
            if terminal { Output.prompt("Enter \(what) (standard input): ") }
            defer { if terminal { Output.prompt("\n") } }
            return try library(.standardInput, what: what)
        case .prompt:
            guard isatty(STDIN_FILENO) == 1 else {
                let options =
                    newKey
                    ? "--new-key-env VAR, --new-key-file PATH or --new-key-stdin"
                    : "--key-env VAR, --key-file PATH, --key-stdin or --key-credential NAME"
                throw CLIError.usage("no \(what) given: use \(options) (or run on a terminal to be prompted)")
            }
            guard confirm else { return try library(.terminal(prompt: "Enter \(what): "), what: what) }
            // A new key is typed twice; a mismatch asks again, up to three times.
            for attempt in 1...Self.confirmationAttempts {
                let material = try library(.terminal(prompt: "Enter \(what): "), what: what)
                let again = try library(.terminal(prompt: "Repeat \(what): "), what: what)
                if again.isEqual(to: material) { return material }
                if attempt < Self.confirmationAttempts {
                    Output.message("fmdb-cipher: the two entries of the \(what) differ; type it again")
                }
            }
            throw CLIError.usage(
                "the two entries of the \(what) differed \(Self.confirmationAttempts) times: nothing was changed")
        }
    }

    /// The library's reader, its errors as the tool's: a file that cannot be used exits 66 (EX_NOINPUT),
    /// other refusals 64 (EX_USAGE); the message is the library's, which never repeats a path or name.
    private func library(_ source: FMDB.KeySource, what: String) throws -> KeyMaterial {
        do {
            return try KeyMaterial.read(from: source, describedAs: what) { warning in
                Output.message("fmdb-cipher: warning: " + warning)
            }
        } catch let error as FMDatabaseError {
            switch FMResultCode(rawValue: error.extendedCode) {
            case .cannotOpen, .permission: throw CLIError(error.message, code: Exit.noInput)
            case .misuse: throw CLIError.usage(error.message)
            default: throw error
            }
        }
    }
}
