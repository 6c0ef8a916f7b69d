/// Where a program reads a secret from: see `KeyMaterial.read(from:describedAs:warning:)`.
///
/// ```swift
/// let material = try KeyMaterial.read(from: .environment(name: "APP_DB_KEY", unsetAfterReading: true))
/// let queue = try FMDatabaseQueue(path: path, keyProvider: PassphraseKeyProvider(material: material))
/// ```
///
/// A secret never passes through a `String` on the way: each source is read with `getenv(3)` or
/// `read(2)` straight into wiped memory.
public enum KeySource: Sendable, Equatable {
    /// The controlling terminal (`/dev/tty`; standard input when it is a terminal and there is no
    /// `/dev/tty`), with echo off, after writing `prompt` there. One line is read; a signal meanwhile
    /// (SIGINT, SIGTERM, SIGHUP, SIGQUIT) turns echo back on first, then gets the disposition it had before
    /// the prompt: the program's own handler runs (echo goes off again if it returns and the prompt goes
    /// on), the default action ends the process, an ignored signal stays ignored.
    case terminal(prompt: String)
    /// One line of standard input (without its "\n" or "\r\n"), read a byte at a time so that nothing
    /// past it is consumed: a second read takes the second line. Echo is off when standard input is
    /// a terminal.
    case standardInput
    /// An environment variable. With `unsetAfterReading`, its value is overwritten with zeros in place
    /// and the variable is removed, so child processes and later `getenv` calls do not see it (this
    /// also clears it from `/proc/self/environ` when the value is the one the process started with).
    case environment(name: String, unsetAfterReading: Bool = false)
    /// A file (one trailing newline is removed). A directory is refused; a regular file group or
    /// others can write is refused (they could choose the key); a regular file group or others can
    /// read is read with a warning. A named pipe nobody writes to is refused at once, never waited on;
    /// a pipe with a writer (`<(pass show db)`) is read to its end.
    case file(path: String)
}
