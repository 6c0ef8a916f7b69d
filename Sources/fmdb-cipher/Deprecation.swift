import ArgumentParser

/// Spellings of an earlier release that still work for one more release, each with a warning on standard
/// error naming the spelling that replaces it (scripts keep running; their logs say what to change).
enum Deprecation {
    static func warn(_ old: String, use new: String) {
        Output.message("fmdb-cipher: warning: \(old) is deprecated and will be removed in the next release; use \(new)")
    }

    /// Warns when an option was given under its old (hidden) name; a usage error when both names are given.
    static func check(_ current: Any?, _ currentName: String, old: Any?, oldName: String) throws {
        guard old != nil else { return }
        guard current == nil else { throw ValidationError("give \(currentName) only (\(oldName) is its old name)") }
        warn(oldName, use: currentName)
    }
}
