import Foundation

/// What `check` found: with `--json` one object (`path`, `ok`, `problems`, `cipher_integrity_check`); the text is
/// "ok", or the problems, one a line.
struct CheckReport: Report {
    let path: String
    /// Whether no problem was found.
    let ok: Bool
    /// integrity_check's lines and the pages cipher_integrity_check failed; empty when the database is sound.
    let problems: [String]
    /// What became of SQLCipher's page check: "ok", "failed", or why it did not run.
    let cipherIntegrityCheck: String

    enum CodingKeys: String, CodingKey {
        case path, ok, problems
        case cipherIntegrityCheck = "cipher_integrity_check"
    }

    init(path: String, problems: [String], cipherIntegrityCheck: String) {
        self.path = path
        ok = problems.isEmpty
        self.problems = problems
        self.cipherIntegrityCheck = cipherIntegrityCheck
    }

    var lines: [String] { ok ? ["ok"] : problems }
}
