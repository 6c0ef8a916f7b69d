import Foundation

extension KeyMaterial {
    /// The longest secret `read(from:describedAs:warning:)` accepts, in bytes.
    public static let maximumInputLength = 64 * 1024

    /// Reads a secret from `source` into wiped memory.
    ///
    /// ```swift
    /// let material = try KeyMaterial.read(from: .terminal(prompt: "Database passphrase: "))
    /// let queue = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider(material: material))
    /// ```
    ///
    /// Messages name the secret as `what` ("key", "new key", "key for app.db") and never repeat a
    /// file path or variable name from `source`: a path or a name is sometimes the secret itself,
    /// given by mistake where the path belongs.
    ///
    /// - Parameters:
    ///   - source: where the secret is.
    ///   - what: how messages name the secret.
    ///   - warning: called with a message when the secret is read but deserves a warning (a key file
    ///     group or others can read).
    /// - Returns: the secret, never empty, at most `maximumInputLength` bytes.
    /// - Throws: `FMDatabaseError`: SQLITE_CANTOPEN (a file that cannot be opened, a directory),
    ///   SQLITE_PERM (a key file group or others can write), SQLITE_IOERR (a read that failed),
    ///   SQLITE_MISUSE (a variable not set, input that ended before a line, no terminal, a pipe
    ///   nobody wrote to, a secret that is empty or too long).
    public static func read(
        from source: KeySource, describedAs what: String = "key", warning: (String) -> Void = { _ in }
    ) throws -> KeyMaterial {
        let material: KeyMaterial
        switch source {
        case .terminal(let prompt):
            material = try KeyInput.readTerminal(prompt: prompt, what: what)
        case .standardInput:
            guard let line = try TerminalEcho.withEchoOff(STDIN_FILENO, { try KeyInput.readLine(fd: STDIN_FILENO) })
            else {
                throw FMDatabaseError.misuse("standard input ended before the \(what) was read")
            }
            material = line
        case .environment(let name, let unsetAfterReading):
            material = try KeyInput.readEnvironment(name, unset: unsetAfterReading, what: what)
        case .file(let path):
            material = try KeyInput.readFile(path, what: what, warning: warning)
        }
        guard !material.isEmpty else { throw FMDatabaseError.misuse("the \(what) is empty") }
        return material
    }
}

/// The readers behind `KeyMaterial.read(from:)`: getenv(3) and read(2) into wiped memory.
enum KeyInput {
    static let maximumLength = KeyMaterial.maximumInputLength

    static func readEnvironment(_ name: String, unset: Bool, what: String) throws -> KeyMaterial {
        // The name is not repeated: it may be the key itself, given by mistake (`--key-env "$KEY"`).
        guard !name.isEmpty, !name.contains("="), let value = getenv(name) else {
            throw FMDatabaseError.misuse(
                "the environment variable given for the \(what) is not set "
                    + "(its name is not shown, in case it is a key given by mistake)")
        }
        let length = strlen(value)
        let material = KeyMaterial(copying: UnsafeRawBufferPointer(start: value, count: length))
        if unset {
            // The bytes getenv points at live in the environment block itself (the process's initial
            // stack, or setenv's copy): zero them where they are, then drop the variable.
            memset(value, 0, length)
            unsetenv(name)
        }
        return material
    }

    static func readFile(_ path: String, what: String, warning: (String) -> Void) throws -> KeyMaterial {
        // The path is not repeated in messages: it may be the key itself, given by mistake.
        // O_NONBLOCK: a named pipe nobody writes to is opened at once (and then reads as empty, refused
        // below) instead of hanging; the flag is cleared after the open, so a pipe with a writer, such as
        // `--key-file <(pass show db)`, is read to its end.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN,
                message: "cannot read the \(what) from the file given: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN,
                message: "cannot read the \(what) from the file given: \(String(cString: strerror(errno)))")
        }
        let type = status.st_mode & S_IFMT
        if type == S_IFDIR {
            throw FMDatabaseError(
                code: SQLITE_CANTOPEN, message: "cannot read the \(what) from the file given: it is a directory")
        }
        // A key file others can change lets them choose the key (a new key above all): refused, as
        // SystemdCredentialKeyProvider refuses such a credential. One others can read is worth a warning,
        // as ssh gives for private keys (pipes such as `<(pass show db)` are not files and are fine).
        if type == S_IFREG, status.st_mode & 0o022 != 0 {
            let mode = String(status.st_mode & 0o7777, radix: 8)
            throw FMDatabaseError(
                code: SQLITE_PERM,
                message: "the file holding the \(what) has mode 0\(mode): group or others can change it, "
                    + "so it is not used; chmod 600 it")
        }
        if type == S_IFREG, status.st_mode & 0o077 != 0 {
            let mode = String(status.st_mode & 0o7777, radix: 8)
            warning(
                "the file holding the \(what) has mode 0\(mode): group or others can read or change it; chmod 600 it")
        }
        var failure: Int32 = 0
        let material = try KeyMaterial(capacity: maximumLength + 1) { buffer in
            var total = 0
            while total < buffer.count {
                let n = Foundation.read(fd, buffer.baseAddress?.advanced(by: total), buffer.count - total)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return 0
                }
                if n == 0 { break }
                total += n
            }
            return total
        }
        if failure != 0 {
            throw FMDatabaseError(
                code: SQLITE_IOERR,
                message: "cannot read the \(what) from the file given: \(String(cString: strerror(failure)))")
        }
        guard material.count <= maximumLength else {
            throw FMDatabaseError.misuse("the file given for the \(what) is longer than \(maximumLength) bytes")
        }
        if material.isEmpty, type == S_IFIFO {
            throw FMDatabaseError.misuse("the file given for the \(what) is a pipe with nothing written to it")
        }
        return material.trimmingTrailingNewline()
    }

    /// One line (without its "\n" or "\r\n"), read a byte at a time so nothing past it is consumed;
    /// nil when the input ends before any byte.
    static func readLine(fd: Int32) throws -> KeyMaterial? {
        var sawAnything = false
        var failure: Int32 = 0
        let material = try KeyMaterial(capacity: maximumLength) { buffer in
            var total = 0
            while total < buffer.count {
                let n = Foundation.read(fd, buffer.baseAddress?.advanced(by: total), 1)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return 0
                }
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
        if failure != 0 {
            throw FMDatabaseError(
                code: SQLITE_IOERR, message: "reading the key failed: \(String(cString: strerror(failure)))")
        }
        return sawAnything ? material : nil
    }

    /// `/dev/tty` (standard input when that is a terminal and there is no `/dev/tty`): the prompt,
    /// then one line with echo off.
    static func readTerminal(prompt: String, what: String) throws -> KeyMaterial {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        defer { if tty >= 0 { close(tty) } }
        let fd: Int32
        if tty >= 0 {
            fd = tty
        } else if isatty(STDIN_FILENO) == 1 {
            fd = STDIN_FILENO
        } else {
            throw FMDatabaseError.misuse("there is no terminal to read the \(what) from")
        }
        return try readTerminal(fd: fd, output: fd == STDIN_FILENO ? STDERR_FILENO : fd, prompt: prompt)
    }

    /// Reads one line from the terminal `fd` with echo off; `prompt` goes to `output` once echo is off
    /// (as getpass(3) orders it), and a newline after the line.
    static func readTerminal(fd: Int32, output: Int32, prompt: String) throws -> KeyMaterial {
        let line = try TerminalEcho.withEchoOff(fd) {
            writeAll(output, prompt)
            defer { writeAll(output, "\n") }
            return try readLine(fd: fd)
        }
        guard let line else { throw FMDatabaseError.misuse("no key was entered") }
        return line
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(fd, bytes.baseAddress?.advanced(by: offset), bytes.count - offset)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}
