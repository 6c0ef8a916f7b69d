@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// `KeyMaterial.read(from:)`: each source into wiped memory, with the tool's rules for key files.
/// The terminal is a pseudo-terminal this test opens (posix_openpt); the signal path, which ends the
/// process, is covered by the tool's test under script(1) (ToolKeySourceTests).
final class KeyMaterialReadingTests: FMDBCipherTestCase {
    func string(_ material: KeyMaterial) -> String {
        material.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    func code(_ body: () throws -> Void) -> (Int32, String) {
        do {
            try body()
            return (SQLITE_OK, "")
        } catch let error as FMDatabaseError {
            return (error.resultCode, error.message)
        } catch {
            return (SQLITE_ERROR, "\(error)")
        }
    }

    func writeFile(_ name: String, _ text: String, mode: mode_t) throws -> String {
        let path = directory.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(chmod(path, mode), 0)
        return path
    }

    // MARK: - Environment

    func testEnvironmentVariableIsReadAndKeptByDefault() throws {
        let name = "FMDB_KEY_INPUT_\(getpid())_KEPT"
        setenv(name, "alpha beta", 1)
        defer { unsetenv(name) }
        XCTAssertEqual(string(try KeyMaterial.read(from: .environment(name: name))), "alpha beta")
        XCTAssertNotNil(getenv(name))
    }

    func testEnvironmentVariableUnsetAfterReadingIsWipedInPlaceAndRemoved() throws {
        let name = "FMDB_KEY_INPUT_\(getpid())_UNSET"
        setenv(name, "s3cret", 1)
        let value = try XCTUnwrap(getenv(name))
        let material = try KeyMaterial.read(from: .environment(name: name, unsetAfterReading: true))
        XCTAssertEqual(string(material), "s3cret")
        XCTAssertNil(getenv(name))
        // glibc keeps setenv's string allocated after unsetenv: its bytes are zeros now.
        XCTAssertEqual((0..<6).map { value[$0] }, [CChar](repeating: 0, count: 6))
    }

    func testMissingOrEmptyVariableIsRefusedWithoutNamingIt() {
        let name = "FMDB_KEY_INPUT_\(getpid())_MISSING"
        let (missing, message) = code { _ = try KeyMaterial.read(from: .environment(name: name)) }
        XCTAssertEqual(missing, SQLITE_MISUSE)
        XCTAssertFalse(message.contains(name), message)
        setenv(name, "", 1)
        defer { unsetenv(name) }
        let (empty, emptyMessage) = code { _ = try KeyMaterial.read(from: .environment(name: name)) }
        XCTAssertEqual(empty, SQLITE_MISUSE)
        XCTAssertEqual(emptyMessage, "the key is empty")
    }

    // MARK: - Files

    func testPrivateFileIsReadWithoutItsTrailingNewline() throws {
        let path = try writeFile("key", "alpha\r\n", mode: 0o600)
        var warnings: [String] = []
        let material = try KeyMaterial.read(from: .file(path: path)) { warnings.append($0) }
        XCTAssertEqual(string(material), "alpha")
        XCTAssertEqual(warnings, [])
    }

    func testFileOthersCanReadIsReadWithAWarning() throws {
        let path = try writeFile("key", "alpha\n", mode: 0o644)
        var warnings: [String] = []
        let material = try KeyMaterial.read(from: .file(path: path), describedAs: "new key") { warnings.append($0) }
        XCTAssertEqual(string(material), "alpha")
        XCTAssertEqual(
            warnings,
            ["the file holding the new key has mode 0644: group or others can read or change it; chmod 600 it"])
    }

    func testFileGroupOrOthersCanWriteIsRefused() throws {
        for mode: mode_t in [0o620, 0o602, 0o666] {
            let path = try writeFile("key-\(mode)", "alpha\n", mode: mode)
            let (result, message) = code { _ = try KeyMaterial.read(from: .file(path: path)) }
            XCTAssertEqual(result, SQLITE_PERM, "mode \(String(mode, radix: 8))")
            XCTAssertTrue(message.contains("group or others can change it"), message)
            XCTAssertFalse(message.contains(path), message)
        }
    }

    func testMissingFileAndDirectoryCannotBeOpenedAndPathsAreNotRepeated() {
        let missing = directory.path("S3cretTypedAsAPath")
        let (noFile, message) = code { _ = try KeyMaterial.read(from: .file(path: missing)) }
        XCTAssertEqual(noFile, SQLITE_CANTOPEN)
        XCTAssertFalse(message.contains("S3cret"), message)
        let (folder, folderMessage) = code { _ = try KeyMaterial.read(from: .file(path: directory.url.path)) }
        XCTAssertEqual(folder, SQLITE_CANTOPEN)
        XCTAssertTrue(folderMessage.hasSuffix("it is a directory"), folderMessage)
    }

    /// Refused, not waited on: a blocking open of a FIFO nobody opens for writing would wait forever, so
    /// the read runs on another thread and the test fails (instead of hanging) if it has not returned after a
    /// minute (a bound for a stuck read, not a measure of speed).
    func testFIFONobodyWritesToIsRefusedWithoutWaiting() throws {
        let fifo = directory.path("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let outcome = Locked<(Int32, String)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                _ = try KeyMaterial.read(from: .file(path: fifo))
                outcome.withLock { $0 = (SQLITE_OK, "") }
            } catch {
                let failure = error as? FMDatabaseError
                outcome.withLock { $0 = (failure?.resultCode ?? SQLITE_ERROR, failure?.message ?? "\(error)") }
            }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "the read is waiting on the FIFO")
        let (result, message) = try XCTUnwrap(outcome.withLock { $0 })
        XCTAssertEqual(result, SQLITE_MISUSE)
        XCTAssertTrue(message.contains("a pipe with nothing written to it"), message)
    }

    func testEmptyAndOversizedFilesAreRefused() throws {
        let empty = try writeFile("empty", "", mode: 0o600)
        XCTAssertEqual(code { _ = try KeyMaterial.read(from: .file(path: empty)) }.0, SQLITE_MISUSE)
        let newline = try writeFile("newline", "\n", mode: 0o600)
        XCTAssertEqual(code { _ = try KeyMaterial.read(from: .file(path: newline)) }.1, "the key is empty")
        let big = try writeFile("big", String(repeating: "k", count: KeyMaterial.maximumInputLength + 1), mode: 0o600)
        XCTAssertEqual(code { _ = try KeyMaterial.read(from: .file(path: big)) }.0, SQLITE_MISUSE)
        let largest = try writeFile(
            "largest", String(repeating: "k", count: KeyMaterial.maximumInputLength), mode: 0o600)
        XCTAssertEqual(try KeyMaterial.read(from: .file(path: largest)).count, KeyMaterial.maximumInputLength)
    }

    // MARK: - Standard input

    /// Runs `body` with standard input replaced by a pipe holding `text`.
    func withStandardInput(_ text: String, _ body: () throws -> Void) throws {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        _ = text.withCString { write(ends[1], $0, strlen($0)) }
        close(ends[1])
        let saved = dup(STDIN_FILENO)
        dup2(ends[0], STDIN_FILENO)
        close(ends[0])
        defer {
            dup2(saved, STDIN_FILENO)
            close(saved)
        }
        try body()
    }

    func testStandardInputGivesOneLineAtATime() throws {
        try withStandardInput("first\r\nsecond\n") {
            XCTAssertEqual(string(try KeyMaterial.read(from: .standardInput)), "first")
            XCTAssertEqual(string(try KeyMaterial.read(from: .standardInput)), "second")
            let (ended, message) = code { _ = try KeyMaterial.read(from: .standardInput, describedAs: "new key") }
            XCTAssertEqual(ended, SQLITE_MISUSE)
            XCTAssertEqual(message, "standard input ended before the new key was read")
        }
    }

    // MARK: - Terminal

    /// A pseudo-terminal: its controlling side and the terminal the program reads from.
    func openTerminal() throws -> (main: Int32, terminal: Int32) {
        // grantpt, unlockpt and ptsname_r are behind _XOPEN_SOURCE in glibc's headers: looked up at run time.
        typealias Call = @convention(c) (Int32) -> Int32
        typealias Name = @convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32
        guard let unlock = dlsym(nil, "unlockpt"), let nameOf = dlsym(nil, "ptsname_r") else {
            throw XCTSkip("no pseudo-terminal functions here")
        }
        let main = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var name = [CChar](repeating: 0, count: 128)
        guard main >= 0, unsafeBitCast(unlock, to: Call.self)(main) == 0,
            unsafeBitCast(nameOf, to: Name.self)(main, &name, name.count) == 0
        else { throw XCTSkip("no pseudo-terminals here") }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let terminal = open(path, O_RDWR | O_NOCTTY)
        guard terminal >= 0 else { throw XCTSkip("cannot open the pseudo-terminal") }
        return (main, terminal)
    }

    func echoIsOn(_ fd: Int32) -> Bool {
        var state = termios()
        XCTAssertEqual(tcgetattr(fd, &state), 0)
        return state.c_lflag & tcflag_t(ECHO) != 0
    }

    func handler(_ number: Int32) -> Int {
        var action = sigaction()
        sigaction(number, nil, &action)
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
    }

    func testEchoIsOffWhileReadingAndBackOnAfterwardsWithTheSignalHandlersPutBack() throws {
        let (main, terminal) = try openTerminal()
        defer {
            close(terminal)
            close(main)
        }
        let before = TerminalEcho.fatalSignals.map(handler)
        XCTAssertTrue(echoIsOn(terminal))
        var during: [Int] = []
        let echoDuring = TerminalEcho.withEchoOff(terminal) {
            during = TerminalEcho.fatalSignals.map(handler)
            return echoIsOn(terminal)
        }
        XCTAssertFalse(echoDuring)
        XCTAssertNotEqual(during, before, "a handler restores the terminal on a signal")
        XCTAssertTrue(echoIsOn(terminal))
        XCTAssertEqual(TerminalEcho.fatalSignals.map(handler), before)
    }

    func testIgnoredSignalStaysIgnoredWhileEchoIsOff() throws {
        let (main, terminal) = try openTerminal()
        defer {
            close(terminal)
            close(main)
        }
        let old = signal(SIGHUP, SIG_IGN)
        defer { signal(SIGHUP, old) }
        let during = TerminalEcho.withEchoOff(terminal) { handler(SIGHUP) }
        XCTAssertEqual(during, unsafeBitCast(SIG_IGN, to: Int.self))
    }

    func testTerminalLineIsReadWithoutEchoAfterThePrompt() throws {
        let (main, terminal) = try openTerminal()
        defer {
            close(terminal)
            close(main)
        }
        // Typing starts once the prompt shows: by then echo is off (the prompt is written after it).
        let typist = Thread {
            var seen = [UInt8]()
            var byte: UInt8 = 0
            while !String(decoding: seen, as: UTF8.self).contains("Passphrase: "), read(main, &byte, 1) == 1 {
                seen.append(byte)
            }
            _ = write(main, "tr0ub4dor\n", 10)
        }
        typist.start()
        let material = try KeyInput.readTerminal(fd: terminal, output: terminal, prompt: "Passphrase: ")
        XCTAssertEqual(string(material), "tr0ub4dor")
        XCTAssertTrue(echoIsOn(terminal))
        // What the terminal showed after the prompt: the newline written after the line, no typed key.
        var shown = [UInt8](repeating: 0, count: 256)
        let flags = fcntl(main, F_GETFL)
        _ = fcntl(main, F_SETFL, flags | O_NONBLOCK)
        let n = read(main, &shown, shown.count)
        let text = n > 0 ? String(decoding: shown[0..<n], as: UTF8.self) : ""
        XCTAssertFalse(text.contains("tr0ub4dor"), text)
    }

    func testTerminalReadRefusesAnEmptyEntry() throws {
        let (main, terminal) = try openTerminal()
        defer {
            close(terminal)
            close(main)
        }
        let typist = Thread {
            var seen = [UInt8]()
            var byte: UInt8 = 0
            while !String(decoding: seen, as: UTF8.self).contains("> "), read(main, &byte, 1) == 1 { seen.append(byte) }
            var eof: UInt8 = 4  // Ctrl-D at the start of a line: end of input.
            _ = write(main, &eof, 1)
        }
        typist.start()
        let (result, message) = code { _ = try KeyInput.readTerminal(fd: terminal, output: terminal, prompt: "> ") }
        XCTAssertEqual(result, SQLITE_MISUSE)
        XCTAssertEqual(message, "no key was entered")
    }

    func testNoTerminalIsRefusedWhenThereIsNone() throws {
        guard open("/dev/tty", O_RDWR | O_NOCTTY) < 0, isatty(STDIN_FILENO) == 0 else {
            throw XCTSkip("this test runs with a terminal")
        }
        let (result, message) = code { _ = try KeyMaterial.read(from: .terminal(prompt: "Key: ")) }
        XCTAssertEqual(result, SQLITE_MISUSE)
        XCTAssertEqual(message, "there is no terminal to read the key from")
    }
}
