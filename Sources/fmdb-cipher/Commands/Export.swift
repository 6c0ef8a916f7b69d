import ArgumentParser
import FMDB
import Foundation

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy an encrypted database into a new one with another key or other cipher settings.",
        discussion: """
            Written to a temporary file beside DEST, verified with the new key and settings, and renamed into \
            place; SRC is not changed. SRC's key and settings are --kdf, --cipher-page-size and --kdf-iter; \
            DEST's the same names with new- in front (--new-kdf, --new-cipher-page-size, --new-kdf-iter). A DEST \
            with a non-default --new-cipher-page-size or --new-kdf-iter needs the same settings to open (here \
            --cipher-page-size / --kdf-iter; in the sqlcipher shell PRAGMA cipher_page_size / PRAGMA kdf_iter \
            after PRAGMA key); the exact flags that open DEST are said on standard error when DEST is written, \
            as for every new file whose settings are not its format's defaults. --json prints one JSON object on \
            standard output once DEST is in place: {"path", "open_with" (those flags), "kdf", "format", \
            "cipher_page_size", "kdf_iter", "key_slots"}.

            A slotted SRC (keys) opened through a slot (found without --kdf, or --kdf slot, slot-raw or \
            slot-recovery) with no --new-key-* is copied with its slots: DEST keeps the data key and SRC's salt, and \
            SRC-keyslots is copied byte for byte to DEST-keyslots (0600; refused if it exists, unless --force) after \
            the copy was verified to open through it; DEST-keyslots is moved into place before DEST. With \
            --new-key-*, DEST is a single-key database without slots. DEST and DEST-keyslots are a pair: an \
            existing DEST-keyslots is refused without --force (exit 73) for every copy; --force keeps the old \
            pair in the private directory beside DEST until the new one is in place (never a DEST beside a \
            slot file that is not its own; on a failure the old pair is put back), and a copy without slots \
            removes DEST-keyslots (said on standard error).

            --new-kdf slot (or slot-raw) puts the database under key slots without a plaintext copy: DEST gets a \
            random data key and DEST-keyslots with one slot for the new key (--slot-kdf, --recovery as in \
            encrypt). The old key then no longer opens DEST, nor does any program that keys the file itself \
            (PRAGMA key): it opens through its slots (fmdb-cipher, a KeySlotKeyProvider), which is said on \
            standard error. --keep-old-key adds a slot for the old key, so that it opens DEST through the slots \
            too. SRC is not changed: replace it with DEST (mv DEST SRC; mv DEST-keyslots SRC-keyslots) once the \
            programs that open it use the slots.

            A SRC with a plaintext header (opened with --cipher-plaintext-header-size and --cipher-salt) is \
            copied with it: DEST keeps the header's size and SRC's salt, so the app that wrote SRC opens DEST \
            with the new key. --new-cipher-plaintext-header-size 0 drops it (DEST then holds a new salt in its \
            first 16 bytes, as SQLCipher's default files do); another size, or --new-cipher-salt, writes that one.

            --format 3 or 4 writes DEST in SQLCipher 3's or 4's format (default: the linked SQLCipher's), \
            for a peer on the other line: a format-3 file opens in a SQLCipher 4 shell after \
            PRAGMA cipher_compatibility = 3. SQLCipher 3.x cannot write format 4 (refused, exit 64).

            Examples:
              OLD=... NEW=... fmdb-cipher export a.db b.db --key-env OLD --new-key-env NEW
              fmdb-cipher export a.db b.db --key-env OLD --new-key-env NEW --new-cipher-page-size 4096
              fmdb-cipher export a.db for-sqlcipher3.db --key-env OLD --new-key-env NEW --format 3
              fmdb-cipher export app.db copy.db --kdf slot --key-env OPS     # a slotted copy: same slots
              fmdb-cipher export app.db slotted.db --key-env OLD --new-key-env OPS --new-kdf slot --recovery
            """
    )

    @Argument(help: "The encrypted database to read.") var source: String
    @Argument(help: "The encrypted database to create.") var destination: String
    @OptionGroup var key: KeyOptions
    @OptionGroup var newKeySource: NewKeySourceOptions
    @Option(
        name: .customLong("new-kdf"),
        help: """
            How the new key is used (default: the same as --kdf; a slot key's: passphrase, or raw for slot-raw). \
            slot or slot-raw: DEST gets key slots, a new random data key, the new key its first slot.
            """)
    var newKDF: NewFileKDF?
    @Option(
        name: .customLong("new-cipher-page-size"),
        help: ArgumentHelp(
            "Cipher page size of DEST (default: the format's, 1024 for 3, 4096 for 4).", valueName: "BYTES"))
    var newPageSize: Int?
    @Option(
        name: .customLong("new-kdf-iter"),
        help: ArgumentHelp(
            "SQLCipher KDF iterations of DEST for passphrase keys (default: the format's, 64000 for 3, 256000 for 4).",
            valueName: "N"))
    var newKDFIterations: Int?
    @Option(
        name: .customLong("unsafe-new-kdf-iter"),
        help: ArgumentHelp(
            "KDF iterations of DEST below the 64000 floor (weak: only for a reader that needs it).", valueName: "N"))
    var unsafeNewKDFIterations: Int?
    @OptionGroup var newChoices: NewCipherChoiceOptions
    @Option(
        help: ArgumentHelp(
            "File format of DEST: 3 or 4 (SQLCipher 3 or 4; default: the linked SQLCipher's).", valueName: "N"))
    var format: Int?
    @Option(
        name: .customLong("slot-kdf"),
        help: ArgumentHelp(
            "With --new-kdf slot: the KDF of the passphrase slot, scrypt (N=2^15, default) or pbkdf2 (SHA-512 x "
                + "256,000)."))
    var slotKDF: SlotKDF?
    @Flag(help: "With --new-kdf slot or slot-raw: also add a recovery-key slot and print the recovery key (once).")
    var recovery = false
    @Flag(
        name: .customLong("keep-old-key"),
        help: "With --new-kdf slot or slot-raw: also add a slot for the old key (it opens DEST through the slots).")
    var keepOldKey = false
    @Flag(help: "Replace DEST and DEST-keyslots if they exist (a copy without slots removes DEST-keyslots).")
    var force = false
    @Flag(help: "No progress output.") var quiet = false
    @Flag(
        help:
            """
            When standard error is not a terminal, print progress lines on it: progress export PERCENT BYTES TOTAL \
            BYTES_PER_SECOND.
            """
    )
    var progress = false
    @Flag(help: "Print one JSON object on standard output: DEST, the flags that open it, its settings.")
    var json = false

    func validate() throws {
        let slotted = newKDF?.kdf.opensSlot == true
        if !slotted, recovery || slotKDF != nil || keepOldKey {
            throw ValidationError(
                "--recovery, --slot-kdf and --keep-old-key make a slotted copy: add --new-kdf slot (or slot-raw)")
        }
        if keepOldKey, key.kdf.opensSlot {
            throw ValidationError(
                "--keep-old-key keeps a single key as a slot; SRC is opened through a slot (copy its slots with no "
                    + "--new-key-* and no --new-kdf instead)")
        }
    }

    func run() throws {
        try runReportingErrors {
            let destinationFormat = try Self.format(format)
            let floorSettings = try KDFFloor.newFileSettings(
                pageSize: newPageSize, pageSizeOption: "--new-cipher-page-size",
                iterations: newKDFIterations,
                unsafeIterations: unsafeNewKDFIterations,
                option: "--new-kdf-iter", unsafeOption: "--unsafe-new-kdf-iter", format: destinationFormat)
            let settings = try newChoices.settings(floorSettings)
            let kind = try DatabaseFiles.requireInput(source)
            if kind == .plaintext {
                throw CLIError(
                    "\(source): is a plaintext SQLite database (not encrypted): make an encrypted copy with "
                        + "`fmdb-cipher encrypt \(source) \(destination)`", code: Exit.wrongKey, hintsKey: false)
            }
            WeakCipherWarning.warn(settings, file: destination)
            let reader = KeyReader()
            let material = try reader.read(key.source, what: "key for \(source)")
            let (kdf, provider) = try key.opening(source, with: material)
            // SRC opened through a key slot and no new key: DEST keeps the data key and SRC's salt, so SRC's
            // slot file, copied byte for byte to DEST-keyslots, opens it.
            let carriesSlots = kdf.opensSlot && newKeySource.source == nil && newKDF == nil
            let newProvider: any KeyProvider
            var writtenKDF = kdf
            var slots: FMDatabaseCopy.SlotFile = carriesSlots ? .source : .none
            // A new slotted file: a random data key, its first slot the new key (and the old key's, when kept).
            var newSlotSecret: KeySlotSecret?
            if let slotKind = newKDF?.kdf, slotKind.opensSlot {
                writtenKDF = slotKind
                let newMaterial = try reader.read(
                    newKeySource.source, what: "new key for \(destination)", confirm: true, newKey: true)
                let secret = try slotKind.slotSecret(newMaterial)
                newSlotSecret = secret
                newProvider = try slotKind.provider(newMaterial)
                slots = .new(secret, kdf: (slotKDF ?? .scrypt).kdf, addingRecoveryKey: recovery)
            } else if carriesSlots {
                newProvider = provider
            } else {
                writtenKDF = newKDF?.kdf ?? kdf.singleKey
                let newMaterial = try reader.read(
                    newKeySource.source, what: "new key for \(destination)", confirm: true, newKey: true)
                newProvider = try writtenKDF.provider(newMaterial)
                var status = stat()
                if lstat(KeySlots.slotFilePath(forDatabaseAt: source), &status) == 0 {
                    Output.message(
                        "fmdb-cipher: note: \(destination) is a single-key database under the new key: the key slots "
                            + "of \(source) are not carried (they are when SRC is opened through a slot, as it is "
                            + "without --kdf, and no --new-key-* is given)")
                }
            }
            // DEST keeps SRC's plaintext header and salt unless --new-cipher-plaintext-header-size says otherwise
            // (0 drops it): the library's rule, so the flags printed for DEST are the ones it was written with.
            let written = FMDatabaseCopy(
                from: source, keyProvider: provider, settings: key.settings, to: destination,
                destinationKeyProvider: newProvider, destinationSettings: settings
            ).writtenSettings
            let recoveryKey = try DatabaseCopy(
                source: source, sourceProvider: provider, sourceSettings: key.settings,
                destination: destination, destinationProvider: newProvider,
                settings: written,
                force: force, quiet: quiet, verb: "export",
                slots: slots, progressLines: progress
            ).run()
            if !quiet {
                let slotFile = KeySlots.slotFilePath(forDatabaseAt: destination)
                let slotted =
                    carriesSlots
                    ? " (with its key slots, \(slotFile))"
                    : newSlotSecret != nil ? " (slotted: key slots in \(slotFile))" : ""
                Output.message("exported \(source) → \(destination)\(slotted)")
            }
            if let newSlotSecret {
                try keepOrWarnAboutOldKey(material, opening: newSlotSecret)
            }
            try OpeningFlags.Written(path: destination, kdf: writtenKDF, settings: written)
                .report(json: json, recovery: recoveryKey)
        }
    }

    /// After a slotted copy of a single-key SRC: with --keep-old-key, a slot for the old key (`material`, as the
    /// raw key or passphrase `--kdf` read it), added through the new key's slot; otherwise the warning that the
    /// old key no longer opens DEST. A slot that could not be added is exit 5: DEST is in place and opens
    /// with the new key, and the command that adds the slot is said.
    private func keepOrWarnAboutOldKey(_ material: KeyMaterial, opening newSecret: KeySlotSecret) throws {
        let direct =
            "programs that key the file themselves (PRAGMA key, a PassphraseKeyProvider or RawKeyProvider) no "
            + "longer open \(destination): it opens through its key slots (fmdb-cipher, a KeySlotKeyProvider)"
        guard keepOldKey else {
            Output.message(
                "fmdb-cipher: warning: the old key does not open \(destination), and " + direct + "; \(source) is "
                    + "unchanged: replace it once its programs use the slots (--keep-old-key keeps the old key as a "
                    + "slot)")
            return
        }
        let oldSecret = try (key.kdf == .raw ? KDF.slotRaw : KDF.slot).slotSecret(material)
        do {
            let slot = try SlotChange.reportingWarnings {
                try KeySlots.addSlot(to: destination, unlockingWith: newSecret, newSecret: oldSecret)
            }
            Output.message(
                "fmdb-cipher: the old key opens \(destination) through slot \(slot.id); note: " + direct)
        } catch {
            let cause = CLIError.from(error, context: "keys add")
            throw CLIError(
                "\(destination) is in place and opens with the new key, but the old key's slot could not be added "
                    + "(\(cause.message)); add it with: fmdb-cipher keys add \(destination) --key-env NEW "
                    + "--new-key-env OLD" + (key.kdf == .raw ? " --new-kdf slot-raw" : ""),
                code: Exit.partlyDone)
        }
    }

    /// `--format N` as a CipherFormat (nil: the linked default); usage errors for what cannot be written here.
    static func format(_ number: Int?) throws -> CipherFormat? {
        guard let number else { return nil }
        guard number == 3 || number == 4, let format = CipherFormat(rawValue: number) else {
            throw CLIError.usage("--format must be 3 or 4 (got \(number))")
        }
        guard format.isSupportedByLinkedSQLCipher else {
            throw CLIError.usage(
                "SQLCipher 4's format needs HMAC-SHA512 page authentication, which the linked SQLCipher "
                    + "\(FMDBCipherVersion.sqlcipher) cannot write; to install an fmdb-cipher that writes it on "
                    + "this system, from the fmdb-cipher source tree: Scripts/install --sqlcipher 4. Or open "
                    + "SQLCipher 3 files in SQLCipher 4 with PRAGMA cipher_compatibility = 3"
            )
        }
        return format
    }
}
