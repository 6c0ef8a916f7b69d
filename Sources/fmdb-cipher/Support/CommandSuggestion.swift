import ArgumentParser

/// "Did you mean": the subcommand nearest to a mistyped one, as git and cargo suggest it.
///
/// A word that is not a subcommand is shown only when a subcommand is within `maximumDistance` edits of it
/// (it is then a misspelt public word, not a key given by mistake); otherwise it stays hidden.
enum CommandSuggestion {
    static let maximumDistance = 2

    /// The message for `arguments` (the command line after the program name) when its subcommand path
    /// has an unknown word where a subcommand is expected, else nil.
    static func message(for arguments: [String], root: any ParsableCommand.Type) -> String? {
        var command = root
        var path: [String] = []
        for word in arguments {
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty, !word.hasPrefix("-") else { return nil }
            if let next = subcommands.first(where: { $0._commandName == word }) {
                command = next
                path.append(word)
                continue
            }
            if word == "help" { return nil }
            let names = subcommands.map { $0._commandName }
            let near =
                names
                .map { (name: $0, distance: distance(word, $0)) }
                .filter { $0.distance <= maximumDistance }
                .min { $0.distance < $1.distance }
            let list = names.joined(separator: ", ")
            let context = path.map { $0 + ": " }.joined()
            // A word is repeated only when it cannot be a key: at least 4 characters, letters only (a short or
            // mixed word such as "sq1" or "inf0" might be a secret typed in the wrong place).
            let repeatable = word.count >= 4 && word.unicodeScalars.allSatisfy { ("a"..."z").contains($0) }
            guard let near, repeatable else {
                if let near {
                    return "\(context)unknown command (not shown, in case it is a key); did you mean '\(near.name)'? "
                        + "(the commands are \(list))"
                }
                return "\(context)unknown command (not shown, in case it is a key); the commands are \(list)"
            }
            return "\(context)unknown command '\(word)'; did you mean '\(near.name)'? (the commands are \(list))"
        }
        return nil
    }

    /// The Levenshtein distance between two words (insertions, deletions and substitutions; a swap of two
    /// neighbours counts as one, as in "rekye").
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var best = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    best = min(best, table[i - 2][j - 2] + 1)
                }
                table[i][j] = best
            }
        }
        return table[a.count][b.count]
    }
}
