import CToolSupport
import FMDB
import Foundation

/// encrypt, decrypt, export, migrate and the backups of rekey: the library's `FMDatabaseCopy` (verified, private,
/// atomic, carrying the slot file), with the tool's progress line, signal clean-up, messages and exit codes.
struct DatabaseCopy {
    let source: String
    let sourceProvider: (any KeyProvider)?
    let sourceSettings: CipherSettings
    let destination: String
    let destinationProvider: (any KeyProvider)?
    let settings: CipherSettings
    let force: Bool
    let quiet: Bool
    let verb: String
    /// The key slot file that goes with the copy (see `FMDatabaseCopy.SlotFile`).
    var slots: FMDatabaseCopy.SlotFile = .none
    /// `--progress`: machine-readable lines when standard error is not a terminal (`ProgressReporter`), the last
    /// at 100 once the copy is verified and in place.
    var progressLines = false

    /// Runs the copy; returns the recovery key (and its slot) of a new slot file made with one, to be shown once.
    @discardableResult
    func run() throws -> (key: RecoveryKey, slot: KeySlotInfo)? {
        var copy = FMDatabaseCopy(
            from: source, keyProvider: sourceProvider, settings: sourceSettings, to: destination,
            destinationKeyProvider: destinationProvider, destinationSettings: settings)
        copy.slotFile = slots
        copy.replacesExisting = force
        let report = try perform { onStage in
            copy.onStage = onStage
            return try copy.run()
        }
        guard let key = report?.recoveryKey, let slot = report?.recoveryKeySlot else { return nil }
        return (key, slot)
    }

    /// Runs `body` (a library copy given the tool's stage handler) with the tool's progress line, signal clean-up,
    /// messages and exit codes; nil when `body` returned nil (nothing to do).
    func perform(_ body: (@escaping (FMDatabaseCopy.Stage) -> Void) throws -> FMDatabaseCopy.Report?) throws
        -> FMDatabaseCopy.Report?
    {
        let stages = makeStages()
        let found: FMDatabaseCopy.Report?
        do {
            found = try body { stages.reached($0) }
        } catch {
            throw failed(error, stages)
        }
        guard let report = found else { return nil }
        finished(report, stages)
        return report
    }

    /// `rekey --backup`: the library's rekey after a backup (`FMDatabaseCopy.rekeyWithBackup`), from the old key
    /// (SRC's and DEST's) to `newProvider`. The backup has every copy's progress line, signal clean-up, messages
    /// and exit codes; a failure to open the database for the rekey is said as `DatabaseFiles.open` says it.
    /// `rekeyStarting` is called with the database's format right before the rekey; an error of the rekey itself
    /// is thrown as the library threw it, for the caller to say. `backupWritten` is called once the backup is
    /// verified and in place.
    func rekey(
        from oldProvider: any KeyProvider, to newProvider: any KeyProvider, busyTimeout: TimeInterval,
        backupWritten: @escaping () -> Void, rekeyStarting: @escaping (CipherFormat?) -> Void
    ) throws -> FMRekeyOutcome {
        let stages = makeStages()
        // The step under way, told by the library's hooks: an error is said as that step's.
        var step = RekeyStep.backup
        do {
            return try FMDatabaseCopy.rekeyWithBackup(
                source, keyProvider: oldProvider, settings: sourceSettings, to: newProvider, backup: destination,
                replacingExisting: force, busyTimeout: busyTimeout, onStage: { stages.reached($0) },
                onBackup: { report in
                    step = .opening
                    backupWritten()
                    finished(report, stages)
                    if !quiet { Output.message("backup written to \(destination)") }
                },
                onRekey: { format in
                    step = .rekey
                    rekeyStarting(format)
                })
        } catch {
            switch step {
            case .backup: throw failed(error, stages)
            case .opening: throw DatabaseFiles.openingError(error, path: source, settings: sourceSettings)
            case .rekey: throw error
            }
        }
    }

    private enum RekeyStep { case backup, opening, rekey }

    private func makeStages() -> CopyStages {
        CopyStages(progress: ProgressReporter(quiet: quiet, lines: progressLines), verb: verb, source: source)
    }

    /// The copy failed: its progress line ends, and its error is said in the tool's terms.
    private func failed(_ error: Error, _ stages: CopyStages) -> CLIError {
        stages.failed()
        return cliError(error, at: stages.stage)
    }

    /// The copy is verified and in place: its last progress line, and what it did, on standard error.
    private func finished(_ report: FMDatabaseCopy.Report, _ stages: CopyStages) {
        stages.completed()
        if let left = report.stagingDirectoryNotRemoved {
            Output.message("fmdb-cipher: warning: \(left.message)")
        }
        if report.removedDestinationSlotFile {
            Output.message(
                "fmdb-cipher: note: removed \(KeySlots.slotFilePath(forDatabaseAt: destination)), the key slot file of "
                    + "the DEST that was replaced: it does not open the new \(destination), which has no key slots")
        }
        if !quiet {
            // Throughput on standard error, so scripts that read standard output see nothing new.
            let total = max(Double(report.sourceBytes), 1)
            let copySeconds = seconds(report.copyDuration)
            Output.message(
                String(
                    format: "%@: %.1f MB in %.2f s (%.1f MB/s); source check %.2f s; verification %.2f s",
                    verb, total / 1e6, copySeconds, total / 1e6 / max(copySeconds, 1e-9),
                    seconds(report.sourceCheckDuration), seconds(report.verificationDuration)))
        }
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The tool's message and exit code for a failed copy, by the stage it failed in.
    private func cliError(_ error: Error, at stage: FMDatabaseCopy.Stage?) -> CLIError {
        let failure = (error as? FMDatabaseError)?.copyFailure
        switch failure {
        case .sourceDamaged?, .verificationFailed?:
            return CLIError((error as NSError).localizedDescription, code: Exit.integrity)
        case .sourceInUse?:
            // The library says why SRC is not replaced; the tool adds its own commands for what to do, by the
            // failure's kind (never by rewording the library's text).
            var message = (error as NSError).localizedDescription
            if verb == "migrate", source == destination {
                message +=
                    " (with fmdb-cipher: `fmdb-cipher sql \(source) 'PRAGMA wal_checkpoint(TRUNCATE)'` with its key "
                    + "checkpoints a -wal left behind; `fmdb-cipher migrate \(source) DEST` migrates into a new file "
                    + "instead)"
            }
            return CLIError(message, code: Exit.busy)
        default: break
        }
        switch stage {
        case .writingSlotFile?:
            return CLIError.from(error, context: "\(verb) \(source) → \(destination): the key slot file")
        case .openingSource?:
            return DatabaseFiles.openingError(error, path: source, settings: sourceSettings)
        case .checkingSource?:
            return CLIError.fromOpened(error, context: source, keyed: sourceProvider != nil)
        case .copying?:
            return CLIError.fromOpened(
                error, context: "\(verb) \(source) → \(destination)", keyed: sourceProvider != nil)
        case .verifying?:
            return CLIError.fromOpened(error, context: "verifying the new database", keyed: destinationProvider != nil)
        default:
            // Checking DEST, making the private directory, publishing: the library's own words, with the
            // tool's way to ask for a replacement in place of the library's (its documented hint).
            let message = (error as NSError).localizedDescription
                .replacingOccurrences(of: FMDatabaseCopy.replaceHint, with: "use --force")
            let code: Int32
            switch failure {
            case .sameFile?: code = Exit.usage
            case .destinationExists?, .cannotCreate?: code = Exit.cannotCreate
            case .destinationInUse?: code = Exit.busy
            default: code = CLIError.from(error, context: destination).code
            }
            return CLIError(message, code: code)
        }
    }
}

/// What a running copy has reached, for its progress line, its error messages and the signal handler
/// (`StagingCleanup`).
private final class CopyStages {
    private let progress: ProgressReporter
    private let verb: String
    private let total: Double
    private let cleanup = StagingCleanup()
    private(set) var stage: FMDatabaseCopy.Stage?
    private var copying = false

    init(progress: ProgressReporter, verb: String, source: String) {
        self.progress = progress
        self.verb = verb
        total = max(Double(DatabaseFiles.fileSize(source)), 1)
    }

    func reached(_ stage: FMDatabaseCopy.Stage) {
        cleanup.reached(stage)
        switch stage {
        case .removedInterruptedCopy, .stagingDirectoryReleased: return
        case .copying(let file):
            copying = true
            let total = total
            progress.start(verb, totalBytes: total) { Double(DatabaseFiles.fileSize(file)) / total }
        case .verifying:
            copying = false
            progress.finish("\(verb): verifying")
        default: break
        }
        self.stage = stage
    }

    /// The copy is verified and in place: its line at 100 (`--progress`).
    func completed() { progress.complete() }

    func failed() {
        if copying { progress.finish("\(verb): failed") }
        copying = false
    }
}
