import FMDB
import Foundation
import TestSupport
import XCTest

/// Shared set-up for the end-to-end tests of the `fmdb-cipher` binary: the base test case's private
/// directory and tool runner (under umask 022), the built tool's path, and databases made with the library.
class ToolTestCase: FMDBCipherTestCase {
    var tool: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        tool = try builtTool()
    }

    /// Runs the tool with `env` added to the environment, under umask 022 (see `runTool`).
    @discardableResult
    func run(_ arguments: [String], env: [String: String] = [:], input: String? = nil) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try runTool(arguments, env: env, input: input ?? "")
    }

    /// Runs `command` on a new pseudo-terminal (its controlling terminal, as a login shell's) and types
    /// `answers` one at a time, each only once the tool is waiting for it: the `n`th answer once the
    /// terminal shows `n` prompts ("Enter ..." or "Repeat ...") and echo is off. (Typed any earlier, an answer
    /// would be discarded when the prompt turns echo off, as getpass(3) does.) `controlC`: sends Ctrl-C
    /// instead of the last answer. Returns the exit status (negative: the signal that ended it), all the
    /// terminal showed, and whether echo was off just before the last answer and back on at the end. Every
    /// wait ends at its event or after 60 s.
    func runOnTerminal(_ command: [String], answers: [String], controlC: Bool = false) throws -> (
        status: Int32, output: String, echoOffAtLastPrompt: Bool, echoOnAfter: Bool
    ) {
        let python = try XCTUnwrap(which("python3"))
        let driver = """
            import os, pty, select, subprocess, sys, termios, time, fcntl, json
            answers, control_c, command = json.loads(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:]
            master, slave = pty.openpty()
            def controlling():
                os.setsid()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            child = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling)
            seen = b""
            def read_some(timeout):
                global seen
                ready, _, _ = select.select([master], [], [], timeout)
                if not ready:
                    return False
                try:
                    seen += os.read(master, 4096)
                    return True
                except OSError:
                    return False
            def echo_on():
                return bool(termios.tcgetattr(slave)[3] & termios.ECHO)
            def prompts():
                return seen.count(b"Enter ") + seen.count(b"Repeat ")
            echo_off_at_last = False
            for number, answer in enumerate(answers, 1):
                deadline = time.time() + 60
                while (prompts() < number or echo_on()) and child.poll() is None and time.time() < deadline:
                    read_some(0.01)
                echo_off_at_last = not echo_on()
                if number == len(answers) and control_c:
                    os.write(master, b"\\x03")
                else:
                    os.write(master, answer.encode() + b"\\n")
            deadline = time.time() + 60
            while child.poll() is None and time.time() < deadline:
                read_some(0.05)
            if child.poll() is None:
                child.kill()
            status = child.wait()
            while read_some(0.2):
                pass
            echo_after = echo_on()
            sys.stdout.write(json.dumps([status, seen.decode("utf-8", "replace"), echo_off_at_last, echo_after]))
            """
        let answersJSON = String(decoding: try JSONEncoder().encode(answers), as: UTF8.self)
        let result = try runProcess(python, ["-c", driver, answersJSON, controlC ? "1" : "0"] + command)
        XCTAssertEqual(result.status, 0, "the terminal driver ran: \(result.stderr)")
        let data = Data(result.stdout.utf8)
        guard let fields = try JSONSerialization.jsonObject(with: data) as? [Any], fields.count == 4,
            let status = fields[0] as? Int, let output = fields[1] as? String,
            let echoOff = fields[2] as? Bool, let echoOn = fields[3] as? Bool
        else {
            XCTFail("the terminal driver's report: \(result.stdout) \(result.stderr)")
            return (-1, result.stdout, false, false)
        }
        return (Int32(status), output.replacingOccurrences(of: "\r", with: ""), echoOff, echoOn)
    }

    /// A plaintext database with a table `t` of `rows` rows of `payload` random bytes each.
    func makePlaintext(_ name: String = "plain.db", rows: Int = 50, payload: Int = 10) throws -> String {
        let file = path(name)
        let db = FMDatabase(path: file)
        XCTAssertTrue(db.open())
        XCTAssertTrue(db.executeUpdate("create table t (id integer primary key, v text, b blob)"))
        XCTAssertTrue(db.beginTransaction())
        for i in 0..<rows {
            XCTAssertTrue(db.executeUpdate("insert into t (v, b) values (?, randomblob(?))", "MARKER-\(i)", payload))
        }
        XCTAssertTrue(db.commit())
        db.close()
        return file
    }

    /// An encrypted copy of a fresh plaintext database, made by the tool with `--kdf raw` (no KDF cost).
    func makeEncrypted(_ name: String = "enc.db", rows: Int = 50, payload: Int = 10) throws -> String {
        let plain = try makePlaintext("src-\(name)", rows: rows, payload: payload)
        let result = try run(
            ["encrypt", plain, path(name), "--kdf", "raw", "--key-env", "K", "--quiet"], env: ["K": Self.rawKey])
        XCTAssertEqual(result.status, 0, result.stderr)
        return path(name)
    }

    static let rawKey = String(repeating: "5a", count: 32)
    static let otherRawKey = String(repeating: "c3", count: 32)

    /// The rows of `t` when `file` opens with the raw key (nil: it does not).
    func rowCount(_ file: String, rawKey: String?) -> Int32? {
        let db = FMDatabase(path: file)
        db.logsErrors = false
        guard db.open() else { return nil }
        defer { db.close() }
        if let rawKey {
            var hex = rawKey
            let provider = hex.withUTF8 {
                try? RawKeyProvider(material: KeyMaterial(copying: UnsafeRawBufferPointer($0)))
            }
            guard let provider, (try? db.setKey(using: provider)) != nil else { return nil }
        }
        guard let rs = db.executeQuery("select count(*) from t"), rs.next() else { return nil }
        return rs.int(forColumnIndex: 0)
    }
}
