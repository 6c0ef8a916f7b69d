import CSQLCipher
import Foundation

/// A new file that a program writes privately and publishes atomically, by the rules ``FMDatabaseCopy`` follows
/// for its copies: for a program's own output beside a database (rows exported as CSV or JSON, a report).
///
/// - The destination is checked with lstat(2): anything there (a file, a FIFO, a symbolic link, even a dangling
///   one) is refused unless `replacingExisting`; a directory always is.
/// - ``path`` is an empty file, mode 0600 whatever the umask, in a private directory (0700) made beside the
///   destination: nobody else can plant a link there.
/// - ``commit()`` moves it into place with one rename that does not replace anything unless
///   `replacingExisting` (a symbolic link at the destination is replaced, never followed), then syncs the
///   directory: reported done only once the rename is on disk.
/// - ``discard()`` (or releasing the value uncommitted) removes the file and the private directory: a failure
///   leaves no partial destination.
///
/// `onStage` is told when the private directory is made (``FMDatabaseCopy/Stage/stagingDirectory(_:)``) and
/// when a signal handler may no longer remove it (``FMDatabaseCopy/Stage/stagingDirectoryReleased(_:)``), so
/// that a program can remove partial output on SIGINT or SIGTERM. Write the contents yourself (open ``path``
/// with `O_WRONLY | O_NOFOLLOW`, and fsync it before ``commit()``). Not `Sendable`: use it on one thread.
///
/// ```swift
/// let output = try FMPrivateFile(destination: "/srv/export/rows.csv")
/// let file = try FileHandle(forWritingTo: URL(fileURLWithPath: output.path))
/// try file.write(contentsOf: Data("id,name\n1,Ada\n".utf8))
/// try file.synchronize()  // on disk before it is named
/// try file.close()
/// try output.commit()
/// ```
public final class FMPrivateFile {
    private let output: PrivateOutput
    private var finished = false

    /// Where to write: an empty file (0600) inside the private directory beside the destination.
    public var path: String { output.file }

    /// The destination, as given.
    public var destination: String { output.destination }

    /// Checks the destination and makes the private directory and the empty file.
    ///
    /// - Parameters:
    ///   - destination: where ``commit()`` puts the file.
    ///   - replacingExisting: whether something already at `destination` may be replaced (a symbolic link
    ///     there is replaced, never followed).
    ///   - source: the file the output is made from (a database whose rows it holds), if any: the
    ///     destination must not be it nor one of its own files (its key slot file, journal, WAL: `.sameFile`,
    ///     whatever `replacingExisting`), and the output's mode is no looser than the source's.
    ///   - onStage: told when the private directory is made and when a signal handler may no longer remove
    ///     it (see the type's discussion).
    /// - Throws: ``FMDatabaseError`` with ``FMDatabaseError/copyFailure`` `.destinationExists` (something is at
    ///   the destination and `replacingExisting` is false) or `.cannotCreate`.
    public init(
        destination: String, replacingExisting: Bool = false, source: String? = nil,
        onStage: ((FMDatabaseCopy.Stage) -> Void)? = nil
    ) throws {
        output = try PrivateOutput(
            destination: destination, force: replacingExisting, source: source, report: onStage ?? { _ in })
    }

    /// Moves the written file into place and syncs its directory; on failure nothing is at the destination
    /// that this value put there, and the private directory is gone.
    public func commit() throws {
        guard !finished else {
            throw FMDatabaseError(code: SQLITE_MISUSE, message: "the private file was already committed or discarded")
        }
        finished = true
        do {
            try output.commit()
        } catch {
            throw output.failing(error)
        }
    }

    /// After a ``commit()`` that succeeded: nil, or the error saying that the private directory could not be
    /// removed after the file was put in place (an I/O error, tried twice). The file is in place all the same;
    /// the directory holds nothing it needs, and the next private file or copy to the same destination removes
    /// it once this process is gone.
    public var stagingDirectoryNotRemoved: FMDatabaseError? { output.leftDirectoryError }

    /// Removes the file and the private directory (also done when an uncommitted value is released).
    public func discard() {
        guard !finished else { return }
        finished = true
        output.discard()
    }
}

@available(*, unavailable)
extension FMPrivateFile: Sendable {}
