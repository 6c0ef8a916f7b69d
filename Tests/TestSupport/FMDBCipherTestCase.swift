import FMDB
import Foundation
import XCTest

/// The base test case of the package's tests: every test gets its own temporary directory (created before
/// it, removed after it), paths in it, keyed databases made in it, and the built `fmdb-cipher` run under
/// umask 022.
///
/// A class that needs more set-up overrides `setUpWithError()` and calls `super` first (the directory
/// exists then), and `tearDown()` calling `super` last.
open class FMDBCipherTestCase: XCTestCase {
    /// This test's own directory; nil outside a test.
    public var directory: TemporaryDirectory!

    /// The prefix of the directory's name (the class's name: a directory left behind by a crash names the
    /// test class that made it).
    open var directoryLabel: String { "fmdb-\(type(of: self))" }

    open override func setUpWithError() throws {
        try super.setUpWithError()
        directory = try TemporaryDirectory(directoryLabel)
    }

    open override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// The path of `name` in this test's directory.
    public func path(_ name: String) -> String { directory.path(name) }

    // MARK: - Keyed databases

    /// A new database `name` in this test's directory, keyed with `provider` and `settings` (the linked
    /// line's default format unless `settings` names one: the same call makes a SQLCipher 3 file on 3.4.1
    /// and a SQLCipher 4 file on 4.x), filled by `fill`, and closed. Returns its path.
    @discardableResult
    public func makeKeyedDatabase(
        _ name: String, provider: any KeyProvider, settings: CipherSettings = CipherSettings(),
        file: StaticString = #filePath, line: UInt = #line,
        _ fill: (FMDatabase) throws -> Void = { _ in }
    ) throws -> String {
        let databasePath = path(name)
        let db = FMDatabase(path: databasePath)
        guard db.open() else { throw db.lastError() }
        do {
            try db.setKey(using: provider, settings: settings)
            try fill(db)
        } catch {
            db.close()
            throw error
        }
        XCTAssertTrue(db.close(), "\(name) closes", file: file, line: line)
        return databasePath
    }

    // MARK: - The fmdb-cipher tool

    /// The `fmdb-cipher` under test: the installed one `FMDB_CIPHER_TOOL` names (`Scripts/test` sets it to
    /// the binary `Scripts/install` built), else the one built with the tests.
    public func builtTool() throws -> String {
        try XCTUnwrap(toolUnderTest(), "build the fmdb-cipher product first, or set FMDB_CIPHER_TOOL")
    }

    /// The `fmdb-test-helper` built with the tests: scenarios run in a child process.
    public func builtHelper() throws -> String {
        try XCTUnwrap(builtProduct("fmdb-test-helper"), "build the fmdb-test-helper product first")
    }

    /// Runs the built `fmdb-cipher` with `arguments` and `env` added to the environment, under umask 022
    /// (the common default, under which a careless create makes world-readable files), whatever the umask
    /// of the test runner. `wrapper` is a command the tool runs under (`timeout 20`, `strace ...`);
    /// `standardOutput` a file its standard output goes to instead of the result (`/dev/full`).
    @discardableResult
    public func runTool(
        _ arguments: [String], env: [String: String] = [:], input: String = "", wrapper: [String] = [],
        standardOutput: String? = nil
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(env) { _, new in new }
        let script =
            "umask 022; out=$1; shift; if [ -n \"$out\" ]; then exec \"$@\" >\"$out\"; else exec \"$@\"; fi"
        return try runProcess(
            "/bin/sh", ["-c", script, "sh", standardOutput ?? ""] + wrapper + [try builtTool()] + arguments,
            input: input, environment: environment)
    }

    // MARK: - Files

    /// The permission bits of `path` (lstat: a link's own), or nil when there is nothing there.
    public func mode(_ path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    /// Whether `path` is a symbolic link (lstat: not followed).
    public func isSymbolicLink(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK
    }

    /// Names in this test's directory (hidden ones included), sorted.
    public func entries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.url.path)) ?? []).sorted()
    }
}
