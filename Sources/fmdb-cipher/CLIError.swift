import ArgumentParser
import FMDB
import Foundation

/// An error the tool reports: a message for standard error and an exit code.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    let code: Int32
    /// Whether a wrong key (exit 65) may be about the key given: false when the file is not one a key opens
    /// (a plaintext database), so no hint about keys or settings is added.
    let hintsKey: Bool

    init(_ message: String, code: Int32 = Exit.failure, hintsKey: Bool = true) {
        self.message = message
        self.code = code
        self.hintsKey = hintsKey
    }

    var description: String { message }

    static func usage(_ message: String) -> CLIError { CLIError(message, code: Exit.usage) }

    /// A wrong key (exit 65) with what the tool noticed about the key given (`WrongKeyHint`).
    var withWrongKeyHint: CLIError {
        guard code == Exit.wrongKey, hintsKey, let hint = WrongKeyHint.text else { return self }
        return CLIError(message + " (\(hint))", code: code)
    }

    /// The slots of `slotFile` were not tried in turn: their key derivations together exceed the library's
    /// budget (`FMDatabaseError.exceedsKeySlotWorkBudget`). A usage error: the operator names the slot.
    /// `keys` commands try every slot of the key's kind (they take no slot id): said when one stopped.
    static func overKeySlotWorkBudget(_ slotFile: String, context: String) -> CLIError {
        let remedy =
            context.hasPrefix("keys ")
            ? "keys commands try the slots in turn and cannot name one: if that slot file belongs to the database, "
                + "it opens through one slot with --slot ID (sql, check, export, ...), but its slots cannot be changed "
                + "by keys; if not, move it away"
            : "if that slot file belongs to the database, open through one slot with --slot ID (ids: fmdb-cipher keys "
                + "list); if not, move it away"
        return CLIError.usage(
            "\(context): the key slots in \(slotFile) were not tried: their key derivations together exceed the work "
                + "one open may spend trying slots in turn (that of one scrypt slot of N=2^22, r=8); " + remedy)
    }

    /// Maps a library error to the tool's exit code, with a message that says what to do.
    static func from(_ error: Error, context: String) -> CLIError {
        if let cli = error as? CLIError { return cli }
        let ns = error as NSError
        guard let code = FMResultCode(error) else { return CLIError("\(context): \(ns.localizedDescription)") }
        let message = "\(context): \(ns.localizedDescription)"
        let library = error as? FMDatabaseError
        if library?.exceedsKeySlotWorkBudget == true, let slotFile = library?.keySlotFile {
            return .overKeySlotWorkBudget(slotFile, context: context)
        }
        switch code {
        case .notADatabase:
            // Said by the code, not by SQLite's text: one message whichever layer reported it; a slot unlock
            // names the slot file it tried.
            if let slotFile = library?.keySlotFile {
                return CLIError(
                    "\(context): wrong key: no key slot in \(slotFile) accepts it (SQLITE_NOTADB)", code: Exit.wrongKey)
            }
            return CLIError("\(context): wrong key, or not an encrypted database (SQLITE_NOTADB)", code: Exit.wrongKey)
        case .corrupt where (error as? FMDatabaseError)?.isDamagedKeySlotFile == true:
            // The slot file's structure or tag is bad: damage, not a wrong key (no slot accepting the
            // secret is SQLITE_NOTADB).
            return CLIError(message, code: Exit.integrity)
        case .corrupt:
            return CLIError(message + " (wrong key, or not an encrypted database)", code: Exit.wrongKey)
        case .format where CipherFormat.linkedDefault == .v3:
            // Most often a SQLCipher 4 file on a SQLCipher 3 system: the library says what a program's
            // developer does; an operator gets the one command that installs a tool that opens it.
            return CLIError(
                message + " To install an fmdb-cipher that opens SQLCipher 4 files on this system, from the "
                    + "fmdb-cipher source tree: Scripts/install --sqlcipher 4", code: Exit.unsupportedFormat)
        case .format:
            return CLIError(message, code: Exit.unsupportedFormat)
        case .cannotOpen, .permission, .authorization:
            return CLIError(message, code: Exit.noInput)
        case .busy, .locked:
            return CLIError(message + " (another process is using the database; try again)", code: Exit.busy)
        case .ioError, .full, .readOnly:
            return CLIError(message, code: Exit.ioError)
        default:
            return CLIError(message, code: Exit.failure)
        }
    }
}

extension ParsableCommand {
    /// The command as it is typed after `fmdb-cipher` ("rekey", "keys add"): the name an error of its own
    /// starts with when nothing more precise is known.
    static var commandPath: String {
        let name = _commandName
        let isKeys = Keys.configuration.subcommands.contains { ObjectIdentifier($0) == ObjectIdentifier(Self.self) }
        return isKeys ? "keys \(name)" : name
    }

    /// Runs a subcommand body, turning every error into a message on standard error and an exit code. An error
    /// the body did not put in the tool's words (a library error it passed on) is said as every other one is,
    /// after the command it stopped: `fmdb-cipher: sql: reading the key failed: Is a directory`.
    func runReportingErrors(_ body: () throws -> Void) throws {
        do {
            try body()
            // Output the body wrote but could not get out (a full disk, /dev/full) fails the command.
            if let failure = Output.takeFailure() { throw failure }
        } catch let error as CLIError {
            Output.message("fmdb-cipher: \(OperatorWords.rewrite(error.withWrongKeyHint.message))")
            throw ExitCode(error.code)
        } catch let error as ExitCode {
            throw error
        } catch {
            let cli = CLIError.from(error, context: Self.commandPath)
            Output.message("fmdb-cipher: \(OperatorWords.rewrite(cli.withWrongKeyHint.message))")
            throw ExitCode(cli.code)
        }
    }
}

extension CLIError {
    /// A slot change's error: a refused change (SQLITE_MISUSE: a secret that already opens a slot, no
    /// such slot, the last slot...) is a usage error; the rest as every command maps them.
    static func fromSlotChange(_ error: Error, context: String) -> CLIError {
        let ns = error as NSError
        if FMResultCode.misuse ~= error {
            return CLIError("\(context): \(ns.localizedDescription)", code: Exit.usage)
        }
        return from(error, context: context)
    }
}

extension CLIError {
    /// Maps an error from a database that has already opened — with its key verified (`keyed`) or as
    /// plaintext. SQLITE_CORRUPT now means damage, and so does SQLITE_NOTADB on a verified key (a later
    /// page that fails its HMAC): exit 2, "damaged", never "wrong key". Other errors map as `from`.
    static func fromOpened(_ error: Error, context: String, keyed: Bool, db: FMDatabase? = nil) -> CLIError {
        if let cli = error as? CLIError { return cli }
        let ns = error as NSError
        guard (error as? FMDatabaseError)?.isDamagedKeySlotFile != true,
            FMResultCode.corrupt ~= error || (keyed && FMResultCode.notADatabase ~= error)
        else {
            return from(error, context: context)
        }
        return CLIError(
            "\(context): the database is damaged (\(ns.localizedDescription)); \(damagedPages(db))",
            code: Exit.integrity)
    }

    /// The first damaged page the linked SQLCipher names, or why it is not known: on SQLCipher 4, PRAGMA
    /// cipher_integrity_check names each page that fails its HMAC; then (and on 3.x, which has no such pragma)
    /// integrity_check's "Page N" / "On tree page N" lines. The message names the linked SQLCipher's version.
    private static func damagedPages(_ db: FMDatabase?) -> String {
        guard let db else { return "the damaged page is not known" }
        let version = db.cipherVersion ?? "?"
        let v4 = CipherFormat.v4.isSupportedByLinkedSQLCipher
        if v4, let failed = try? DatabaseFiles.cipherIntegrityCheck(db), let first = failed.first {
            return "first problem cipher_integrity_check reports: \(hmacFailure(first))\(more(failed.count))"
        }
        let unknown =
            v4
            ? "the damaged page is not known (neither cipher_integrity_check nor integrity_check of SQLCipher "
                + "\(version) names it)"
            : "the damaged page is not known (SQLCipher \(version) does not say which page failed its check)"
        guard let problems = try? DatabaseFiles.integrityCheck(db) else { return unknown }
        let lines = problems.flatMap { $0.split(separator: "\n") }
            .filter { $0.hasPrefix("Page ") || $0.hasPrefix("On tree page ") }
        guard let first = lines.first else { return unknown }
        return "first problem integrity_check reports: \(first)\(more(lines.count))"
    }

    private static func more(_ count: Int) -> String { count > 1 ? " (and \(count - 1) more)" : "" }

    /// "HMAC verification failed for page 114" → "Page 114: HMAC verification failed", the form integrity_check's
    /// own lines take; any other line as it is.
    private static func hmacFailure(_ line: String) -> String {
        let suffix = " for page "
        guard let range = line.range(of: suffix, options: .backwards),
            let page = Int(line[range.upperBound...])
        else { return line }
        return "Page \(page): \(line[..<range.lowerBound])"
    }
}
