import FMDB
import Foundation

/// `--output FILE` (`sql`, `keys export-raw`): the tool's one way to write a result to a file. A new file in a
/// private directory beside FILE (the library's `FMPrivateFile`: 0600 whatever the umask, no link followed,
/// FILE refused unless `--force`, never the database or one of its own files), renamed into place only once
/// written and synced: a failure leaves no FILE.
final class OutputFile {
    let destination: String
    let fd: Int32
    private let file: FMPrivateFile

    /// Makes the private file for `destination`, made from `source` (the database), open for writing.
    init(_ destination: String, force: Bool, source: String) throws {
        self.destination = destination
        let cleanup = StagingCleanup()
        let made: FMPrivateFile
        do {
            made = try FMPrivateFile(
                destination: destination, replacingExisting: force, source: source, onStage: cleanup.reached)
        } catch let error as FMDatabaseError where error.copyFailure != nil {
            let message = error.localizedDescription
                .replacingOccurrences(of: FMDatabaseCopy.replaceHint, with: "use --force")
            switch error.copyFailure {
            case .sameFile?: throw CLIError(message, code: Exit.usage)
            case .destinationInUse?: throw CLIError(message, code: Exit.busy)
            default: throw CLIError(message, code: Exit.cannotCreate)
            }
        } catch {
            throw CLIError.from(error, context: destination)
        }
        let fd = open(made.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            made.discard()
            throw CLIError("cannot open the output file beside \(destination): \(reason)", code: Exit.cannotCreate)
        }
        self.fd = fd
        file = made
    }

    deinit { close(fd) }

    /// Syncs the written file and renames it into place (on disk before it is named: a power loss must not
    /// leave a FILE said to be written, empty).
    func commit() throws {
        guard fsync(fd) == 0 else {
            throw CLIError("cannot write \(destination): \(String(cString: strerror(errno)))", code: Exit.ioError)
        }
        try file.commit()
        // FILE is written and in place: exit 0 stands; what could not be tidied is said.
        if let left = file.stagingDirectoryNotRemoved { Output.message("fmdb-cipher: warning: \(left.message)") }
    }
}
