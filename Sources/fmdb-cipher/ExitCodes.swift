import ArgumentParser
import FMDB
import Foundation

/// The tool's documented exit codes (also in `fmdb-cipher --help`, README.md in short, and the DocC article
/// "The fmdb-cipher tool").
enum Exit {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let integrity: Int32 = 2
    static let checkpointPending: Int32 = 3  // rekey: the key changed, but the WAL checkpoint is pending
    static let rekeyUnchecked: Int32 = 4  // rekey: which key opens the file afterwards could not be checked
    // keys init --recovery: the database and its first slot made, no recovery slot; export --keep-old-key: the
    // slotted copy made, no slot for the old key.
    static let partlyDone: Int32 = 5
    static let usage: Int32 = 64  // EX_USAGE, as swift-argument-parser's own
    static let wrongKey: Int32 = 65  // EX_DATAERR: wrong key, or not a database
    static let noInput: Int32 = 66  // EX_NOINPUT: missing or unreadable input file
    static let unsupportedFormat: Int32 = 69  // EX_UNAVAILABLE: a SQLCipher 4 file, the key right, SQLCipher 3 linked
    static let cannotCreate: Int32 = 73  // EX_CANTCREAT: output exists or cannot be created
    static let ioError: Int32 = 74  // EX_IOERR: I/O error, disk full, read-only
    static let busy: Int32 = 75  // EX_TEMPFAIL: busy or locked, try again

    /// The one table of exit codes and what each means, in the words `fmdb-cipher --help` prints: the man
    /// page's EXIT STATUS is made from it (Scripts/install, from the help), and each row of the DocC article's
    /// table starts with these words (ExitStatusTableToolTests compares the three).
    static let table: [(code: Int32, meaning: String)] = [
        (
            success,
            "success (a warning on standard error says when a change may not survive a power loss yet, or names a "
                + "private directory a copy could not remove)"
        ),
        (failure, "other error, including an SQL error in sql"),
        (
            integrity,
            "a damaged key slot file (its structure or tag is bad); integrity check failed, or damage found after "
                + "the key was verified"
        ),
        (
            checkpointPending,
            "rekey (and rekey --data-key): the key was changed (only the new key opens the file), but the WAL "
                + "checkpoint is pending"
        ),
        (rekeyUnchecked, "rekey: which key opens the file afterwards could not be checked"),
        (
            partlyDone,
            "keys init --recovery, export --keep-old-key: the new database was created and opens, but its recovery "
                + "or old-key slot could not be added"
        ),
        (usage, "usage error"),
        (wrongKey, "wrong key, or not a database"),
        (noInput, "input file missing, unreadable, a directory, or not a regular file"),
        (
            unsupportedFormat,
            "a SQLCipher 4 database (the key is right), or a setting only SQLCipher 4 has, and the linked SQLCipher is "
                + "3.x: Scripts/install --sqlcipher 4"
        ),
        (cannotCreate, "output exists (use --force) or cannot be created"),
        (ioError, "I/O error, disk full, read-only; standard output could not be written"),
        (busy, "database busy or locked: another process holds a lock; try again"),
    ]

    /// The table as the root command's help says it: "Exit codes:", then one line per code.
    static var helpText: String {
        "Exit codes:\n"
            + table.map { "  \(String($0.code).padding(toLength: 4, withPad: " ", startingAt: 0))\($0.meaning)" }
            .joined(separator: "\n")
    }
}

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
        case .cannotOpen, FMResultCode(rawValue: SQLITE_PERM), .authorization:
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
