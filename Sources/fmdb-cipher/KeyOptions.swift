import ArgumentParser
import FMDB
import Foundation

/// How a passphrase or key becomes a KeyProvider (`--kdf`).
enum KDF: String, ExpressibleByArgument, CaseIterable {
    /// SQLCipher's own KDF at every open: files open in the sqlcipher shell with PRAGMA key = '...'.
    case passphrase
    /// The same key as `passphrase`, derived once with OpenSSL (PBKDF2-SHA1 x 64,000).
    case pbkdf2Sqlcipher = "pbkdf2-sqlcipher"
    /// PBKDF2-HMAC-SHA512 x 256,000 over the file's salt.
    case pbkdf2
    /// scrypt N=2^15 r=8 p=1 over the file's salt.
    case scrypt
    /// A 32-byte key (or 64 hex digits): no KDF.
    case raw
    /// A passphrase that opens a key slot (`keys`): the data key is unwrapped from `DB-keyslots`.
    case slot
    /// A raw key (32 bytes or 64 hex digits) that opens a key slot.
    case slotRaw = "slot-raw"
    /// A recovery key that opens a key slot.
    case slotRecovery = "slot-recovery"

    /// Whether the key opens a key slot (the database has a slot file).
    var opensSlot: Bool { self == .slot || self == .slotRaw || self == .slotRecovery }

    /// The key of a single-key copy made with a slot kind's key: a passphrase, or a raw key for slot-raw.
    var singleKey: KDF {
        switch self {
        case .slot, .slotRecovery: return .passphrase
        case .slotRaw: return .raw
        default: return self
        }
    }

    func provider(_ material: KeyMaterial) throws -> any KeyProvider {
        switch self {
        case .passphrase: return PassphraseKeyProvider(material: material)
        case .pbkdf2Sqlcipher: return PBKDF2KeyProvider.sqlcipherCompatible(material: material)
        case .pbkdf2: return PBKDF2KeyProvider(material: material)
        case .scrypt: return ScryptKeyProvider(material: material)
        case .raw: return try RawKeyProvider(material: material)
        case .slot, .slotRaw, .slotRecovery: return KeySlotKeyProvider(secret: try slotSecret(material))
        }
    }
}

/// Where a key comes from.
enum KeySource {
    case environment(String)
    case file(String)
    case standardInput
    case prompt
    case credential(String)
}

/// The key of the database being read (for `encrypt`: of the file being written).
struct KeyOptions: ParsableArguments {
    @Option(
        name: .customLong("key-env"),
        help: ArgumentHelp("Read the key from this environment variable.", valueName: "VAR"))
    var keyEnv: String?

    @Option(
        name: .customLong("key-file"),
        help: ArgumentHelp("Read the key from this file (one trailing newline is stripped).", valueName: "PATH"))
    var keyFile: String?

    @Flag(name: .customLong("key-stdin"), help: "Read the key from the first line of standard input.")
    var keyStdin = false

    @Option(
        name: .customLong("key-credential"),
        help: ArgumentHelp("Read the key from the systemd credential $CREDENTIALS_DIRECTORY/NAME.", valueName: "NAME"))
    var keyCredential: String?

    @Option(
        help:
            "How the key is used: passphrase (SQLCipher's own KDF, shell compatible), pbkdf2-sqlcipher, pbkdf2, scrypt, raw; slot, slot-raw, slot-recovery (a key slot)."
    )
    var kdf: KDF = .passphrase

    @Option(
        name: .customLong("cipher-page-size"),
        help: ArgumentHelp(
            "The database's cipher page size, when it is not its format's (1024 for SQLCipher 3, 4096 for 4).",
            valueName: "BYTES"))
    var cipherPageSize: Int?

    @Option(
        name: .customLong("kdf-iter"),
        help: ArgumentHelp(
            "The database's KDF iterations (passphrase keys), when not its format's (64000 for SQLCipher 3, 256000 for 4).",
            valueName: "N"))
    var kdfIterations: Int?

    var settings: CipherSettings { CipherSettings(pageSize: cipherPageSize, kdfIterations: kdfIterations) }

    // Refused on purpose: a key on the command line is visible to every user (ps, /proc/PID/cmdline).
    @Option(name: [.customLong("key"), .customLong("passphrase"), .customLong("password")], help: .hidden)
    var keyOnCommandLine: String?

    mutating func validate() throws {
        if keyOnCommandLine != nil {
            throw ValidationError(
                "keys are never taken on the command line, where every user on the machine can read them; "
                    + "use --key-env VAR, --key-file PATH or --key-stdin instead"
            )
        }
        if [keyEnv != nil, keyFile != nil, keyStdin, keyCredential != nil].filter({ $0 }).count > 1 {
            throw ValidationError("give the key one way only: --key-env, --key-file, --key-stdin or --key-credential")
        }
        do {
            try CipherOptionRange.check(pageSize: cipherPageSize, option: "--cipher-page-size")
            try CipherOptionRange.check(iterations: kdfIterations, option: "--kdf-iter")
        } catch let error as CLIError {
            throw ValidationError(error.message)
        }
    }

    var source: KeySource? {
        if let keyEnv { return .environment(keyEnv) }
        if let keyFile { return .file(keyFile) }
        if keyStdin { return .standardInput }
        if let keyCredential { return .credential(keyCredential) }
        return nil
    }
}

/// The new key of `rekey` and `export`.
struct NewKeyOptions: ParsableArguments {
    @Option(
        name: .customLong("new-key-env"),
        help: ArgumentHelp("Read the new key from this environment variable.", valueName: "VAR"))
    var newKeyEnv: String?

    @Option(
        name: .customLong("new-key-file"),
        help: ArgumentHelp("Read the new key from this file (one trailing newline is stripped).", valueName: "PATH"))
    var newKeyFile: String?

    @Flag(
        name: .customLong("new-key-stdin"),
        help: "Read the new key from standard input (the second line when --key-stdin is given too).")
    var newKeyStdin = false

    @Option(name: .customLong("new-kdf"), help: "How the new key is used (default: the same as --kdf).")
    var newKDF: KDF?

    @Option(name: [.customLong("new-key"), .customLong("new-passphrase")], help: .hidden)
    var newKeyOnCommandLine: String?

    mutating func validate() throws {
        if newKeyOnCommandLine != nil {
            throw ValidationError(
                "keys are never taken on the command line, where every user on the machine can read them; "
                    + "use --new-key-env VAR, --new-key-file PATH or --new-key-stdin instead"
            )
        }
        if [newKeyEnv != nil, newKeyFile != nil, newKeyStdin].filter({ $0 }).count > 1 {
            throw ValidationError("give the new key one way only: --new-key-env, --new-key-file or --new-key-stdin")
        }
    }

    var source: KeySource? {
        if let newKeyEnv { return .environment(newKeyEnv) }
        if let newKeyFile { return .file(newKeyFile) }
        if newKeyStdin { return .standardInput }
        return nil
    }
}

/// Reads keys without ever holding them in a String: environment variables through getenv, files and
/// standard input with read(2), the terminal with echo off. Every buffer is KeyMaterial (wiped).
final class KeyReader {
    private var stdinLinesRead = 0
    private static let maxKeyLength = 64 * 1024

    /// The key from `source` (or a prompt when nil and standard input is a terminal).
    func read(_ source: KeySource?, what: String, confirm: Bool = false) throws -> KeyMaterial {
        let material: KeyMaterial
        switch source ?? .prompt {
        case .environment(let name):
            // The name is not repeated: it may be the key itself, given by mistake (`--key-env "$KEY"`).
            guard let value = getenv(name) else {
                throw CLIError.usage(
                    "the environment variable given for the \(what) is not set "
                        + "(its name is not shown, in case it is a key given by mistake)")
            }
            let length = strlen(value)
            material = KeyMaterial(copying: UnsafeRawBufferPointer(start: value, count: length))
        case .file(let path):
            material = try readFile(path, what: what)
        case .credential(let name):
            do {
                material = try SystemdCredentialKeyProvider.read(credential: name).trimmingTrailingNewline()
            } catch {
                throw CLIError.from(error, context: "the \(what)")
            }
        case .standardInput:
            // On a terminal, the same as the prompt: no echo.
            let terminal = isatty(STDIN_FILENO) == 1
            if terminal { Output.prompt("Enter \(what) (standard input): ") }
            let read = try Terminal.withEchoOff(STDIN_FILENO) { try readLine(fd: STDIN_FILENO) }
            if terminal { Output.prompt("\n") }
            guard let line = read else {
                throw CLIError.usage("standard input ended before the \(what) was read")
            }
            stdinLinesRead += 1
            material = line
        case .prompt:
            guard isatty(STDIN_FILENO) == 1 else {
                throw CLIError.usage(
                    "no \(what) given: use --key-env VAR, --key-file PATH or --key-stdin (or run on a terminal to be prompted)"
                )
            }
            material = try prompt("Enter \(what): ")
            if confirm {
                let again = try prompt("Repeat \(what): ")
                guard again.isEqual(to: material) else { throw CLIError.usage("the two entries of the \(what) differ") }
            }
        }
        guard !material.isEmpty else {
            throw CLIError.usage("the \(what) is empty")
        }
        return material
    }

    private func readFile(_ path: String, what: String) throws -> KeyMaterial {
        // The path is not repeated in messages: it may be the key itself, given by mistake.
        // O_NONBLOCK: a named pipe nobody writes to is opened at once (and then reads as empty, refused
        // below) instead of hanging; the flag is cleared after the open, so a pipe with a writer, such as
        // `--key-file <(pass show db)`, is read to its end as before.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw CLIError(
                "cannot read the \(what) from the file given: \(String(cString: strerror(errno)))", code: Exit.noInput)
        }
        defer { close(fd) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw CLIError(
                "cannot read the \(what) from the file given: \(String(cString: strerror(errno)))", code: Exit.noInput)
        }
        let type = status.st_mode & S_IFMT
        if type == S_IFDIR {
            throw CLIError("cannot read the \(what) from the file given: it is a directory", code: Exit.noInput)
        }
        // As ssh does for private keys: a key file others can read is worth a warning (pipes such as
        // `--key-file <(pass show db)` are not files and are fine).
        // A key file others can change lets them choose the key (a new key above all): refused, as the
        // library refuses such a systemd credential.
        if type == S_IFREG, status.st_mode & 0o022 != 0 {
            let mode = String(status.st_mode & 0o7777, radix: 8)
            throw CLIError(
                "the file holding the \(what) has mode 0\(mode): group or others can change it, so it is not used; "
                    + "chmod 600 it", code: Exit.noInput)
        }
        if type == S_IFREG, status.st_mode & 0o077 != 0 {
            let mode = String(status.st_mode & 0o7777, radix: 8)
            Output.message(
                "fmdb-cipher: warning: the file holding the \(what) has mode 0\(mode): group or others can "
                    + "read or change it; chmod 600 it")
        }
        let material = try KeyMaterial(capacity: Self.maxKeyLength + 1) { buffer in
            var total = 0
            while total < buffer.count {
                let n = Foundation.read(fd, buffer.baseAddress?.advanced(by: total), buffer.count - total)
                if n < 0 { return -1 }
                if n == 0 { break }
                total += n
            }
            return total
        }
        guard material.count <= Self.maxKeyLength else {
            throw CLIError.usage("the file given for the \(what) is longer than \(Self.maxKeyLength) bytes")
        }
        if material.isEmpty, type == S_IFIFO {
            throw CLIError.usage("the file given for the \(what) is a pipe with nothing written to it")
        }
        return material.trimmingTrailingNewline()
    }

    /// One line (without its newline), read a byte at a time so nothing past it is consumed.
    func readLine(fd: Int32) throws -> KeyMaterial? {
        var sawAnything = false
        let material = try KeyMaterial(capacity: Self.maxKeyLength) { buffer in
            var total = 0
            while total < buffer.count {
                let n = Foundation.read(fd, buffer.baseAddress?.advanced(by: total), 1)
                if n < 0 { return -1 }
                if n == 0 { break }
                sawAnything = true
                if buffer[total] == UInt8(ascii: "\n") {
                    buffer[total] = 0
                    break
                }
                total += 1
            }
            if total > 0, buffer[total - 1] == UInt8(ascii: "\r") { total -= 1 }
            return total
        }
        return sawAnything ? material : nil
    }

    private func prompt(_ text: String) throws -> KeyMaterial {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        let fd = tty >= 0 ? tty : STDIN_FILENO
        defer { if tty >= 0 { close(tty) } }
        _ = text.withCString { write(fd == STDIN_FILENO ? STDERR_FILENO : fd, $0, strlen($0)) }
        defer { _ = write(fd == STDIN_FILENO ? STDERR_FILENO : fd, "\n", 1) }
        guard let line = try Terminal.withEchoOff(fd, { try readLine(fd: fd) }) else {
            throw CLIError.usage("no key was entered")
        }
        return line
    }
}
