/// Decides whether SQL text may hold a key, from SQLite's grammar rather than from spellings: the text is
/// split into tokens as SQLite's tokenizer (`tokenize.c`, `sqlite3GetToken`) splits it, the tokens into
/// statements at each `;`, and a statement holds a key when, after an optional `EXPLAIN` or `EXPLAIN QUERY
/// PLAN`, it is
/// - a `PRAGMA` whose name, after an optional schema (any quoting, comments anywhere), is a key PRAGMA
///   (`key`, `rekey`, `hexkey`, `hexrekey`, `textkey`, `textrekey`, in any case and quoting),
///   `cipher_license` (a commercial edition's license code) or `cipher_add_random` (seed material for
///   SQLCipher's random numbers), whatever its value and its form (`= v`, `(v)`);
/// - an `ATTACH` other than the plain `ATTACH [DATABASE] file AS schema`, with `file` one literal or name
///   that is not a URI with parameters (a `KEY` clause in any form: `KEY hunter2`, `KEY 71331`,
///   `KEY (('k'))`, `KEY trim('k')`, ...; or a file given by an expression, or a `file:` URI with a query,
///   whose `key` or `hexkey` parameter SQLCipher 4 keys the file with when the connection was opened with
///   `SQLITE_OPEN_URI`; 3.4.1 ignores it);
/// - text SQLite cannot split into tokens (an unterminated literal or comment, a character it does not
///   know) in a statement that spells `key` anywhere, in any case.
///
/// Every other statement is shown whole: a column named `key` in ordinary SQL (`WHERE key = 'x'`) does not
/// hide it. No SQL function takes a key (`sqlcipher_export` takes schema names); the other `cipher_*`
/// PRAGMAs set public parameters (`cipher_salt` is stored in the clear in the file's first bytes).
///
/// Related SQLite documentation: <https://www.sqlite.org/lang_attach.html>,
/// <https://www.sqlite.org/pragma.html#syntax>, <https://www.sqlite.org/uri.html>
enum SQLRedaction {
    /// The PRAGMAs whose value is secret (lower case).
    static let secretPragmas: Set<String> = [
        "key", "rekey", "hexkey", "hexrekey", "textkey", "textrekey", "cipher_license", "cipher_add_random",
    ]

    /// True when some statement of `sql` may hold a key (see the type's rule): then the whole text is hidden.
    static func mayHoldKey(_ sql: String) -> Bool {
        let text = Array(sql.utf8)
        var statement: [SQLToken] = []
        var start = 0
        for token in SQLTokenizer(text) {
            if token.kind == .semicolon {
                if statementMayHoldKey(statement, text: text, bytes: start..<token.range.lowerBound) { return true }
                statement.removeAll(keepingCapacity: true)
                start = token.range.upperBound
            } else if token.kind != .space {
                statement.append(token)
            }
        }
        return statementMayHoldKey(statement, text: text, bytes: start..<text.count)
    }

    /// `tokens`: the statement's tokens but white space and comments (an unterminated comment is kept, as
    /// `.illegal`); `bytes`: where the statement is in `text`.
    private static func statementMayHoldKey(_ tokens: [SQLToken], text: [UInt8], bytes: Range<Int>) -> Bool {
        if tokens.contains(where: { $0.kind == .illegal }), spellsKey(text[bytes]) { return true }
        var index = 0
        if tokens.first?.isWord("explain", in: text) == true {
            index = 1
            if index < tokens.count, tokens[index].isWord("query", in: text) { index += 1 }
            if index < tokens.count, tokens[index].isWord("plan", in: text) { index += 1 }
        }
        guard index < tokens.count else { return false }
        let rest = tokens[(index + 1)...]
        if tokens[index].isWord("pragma", in: text) { return namesSecretPragma(rest, text: text) }
        if tokens[index].isWord("attach", in: text) { return !isPlainAttach(rest, text: text) }
        if tokens[index].isWord("vacuum", in: text), let into = rest.firstIndex(where: { $0.isWord("into", in: text) })
        {
            // `VACUUM [schema] INTO file`: SQLCipher 4 keys a `file:` URI's target with its `key` parameter.
            let target = rest[(into + 1)...]
            guard target.count == 1, let file = target.first?.name(in: text) else { return true }
            return lowercasedASCII(file).hasPrefix("file:") && file.contains("?")
        }
        // A PRAGMA or an ATTACH that is not the statement's first word (a trigger's body, a doubled EXPLAIN,
        // a typo): SQLite refuses the statement and quotes it, key and all.
        let nested = rest.contains { $0.isWord("pragma", in: text) || $0.isWord("attach", in: text) }
        return nested && spellsKey(text[bytes])
    }

    /// `PRAGMA name ...` or `PRAGMA schema.name ...` (SQLite's `PRAGMA nm dbnm`): whether the name is a secret
    /// PRAGMA. `PRAGMA key.` with nothing after the dot reads `key` as the name (hiding a malformed one).
    private static func namesSecretPragma(_ rest: ArraySlice<SQLToken>, text: [UInt8]) -> Bool {
        guard let first = rest.first else { return false }
        let qualified = rest.count >= 3 && rest[rest.startIndex + 1].kind == .dot
        guard let name = (qualified ? rest[rest.startIndex + 2] : first).name(in: text) else { return false }
        return secretPragmas.contains(lowercasedASCII(name))
    }

    /// `ATTACH [DATABASE] file AS schema` and nothing more, `file` and `schema` single names or literals, and
    /// `file` not a URI with a query (`file:x.db?key=...`, in any case: more than SQLite reads as one).
    private static func isPlainAttach(_ rest: ArraySlice<SQLToken>, text: [UInt8]) -> Bool {
        var parts = Array(rest)
        if parts.count == 4, parts[0].isWord("database", in: text) { parts.removeFirst() }
        guard parts.count == 3, parts[1].isWord("as", in: text),
            let file = parts[0].name(in: text), parts[2].name(in: text) != nil
        else { return false }
        return !(lowercasedASCII(file).hasPrefix("file:") && file.contains("?"))
    }

    /// Whether `text` holds `key` in any ASCII case (SQLite folds ASCII only).
    private static func spellsKey(_ text: ArraySlice<UInt8>) -> Bool {
        let lowered = text.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0 }
        guard lowered.count >= 3 else { return false }
        for index in 0...(lowered.count - 3)
        where lowered[index] == UInt8(ascii: "k") && lowered[index + 1] == UInt8(ascii: "e")
            && lowered[index + 2] == UInt8(ascii: "y")
        {
            return true
        }
        return false
    }

    /// A database path as a log line may show it: a `file:` URI (any case) loses its query, which may hold a
    /// key (SQLCipher 4 keys the file with a `key` or `hexkey` parameter); other paths are shown as they are.
    static func loggablePath(_ path: String) -> String {
        guard lowercasedASCII(String(path.prefix(5))) == "file:", let query = path.firstIndex(of: "?") else {
            return path
        }
        return path[..<query] + "?(query not shown)"
    }

    static func lowercasedASCII(_ text: String) -> String {
        String(decoding: text.utf8.map { ($0 >= 0x41 && $0 <= 0x5A) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }
}

/// One token of SQL text, as SQLite's tokenizer cuts it.
struct SQLToken {
    enum Kind {
        /// White space or a (terminated) comment.
        case space
        /// A bare word: a keyword or an identifier (`key`, `PRAGMA`).
        case word
        /// `"…"`, `[…]` or `` `…` ``.
        case quotedName
        /// `'…'`.
        case string
        case blob, number, variable, semicolon, dot, other
        /// Text SQLite cannot tokenize: an unterminated literal or comment, a stray character.
        case illegal
    }

    let kind: Kind
    /// Byte offsets in the UTF-8 text.
    let range: Range<Int>

    /// Whether this is the bare word `word` (lower case) in any ASCII case.
    func isWord(_ word: String, in text: [UInt8]) -> Bool {
        kind == .word && range.count == word.utf8.count
            && zip(text[range], word.utf8).allSatisfy { ($0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0) == $1 }
    }

    /// The name a word, quoted name or string stands for, dequoted as `sqlite3Dequote` does; nil for other
    /// tokens.
    func name(in text: [UInt8]) -> String? {
        let bytes = text[range]
        switch kind {
        case .word: return String(decoding: bytes, as: UTF8.self)
        case .quotedName, .string:
            guard let open = bytes.first, bytes.count >= 2 else { return nil }
            let inner = bytes.dropFirst().dropLast()
            if open == UInt8(ascii: "[") { return String(decoding: inner, as: UTF8.self) }
            var out: [UInt8] = []
            var skip = false
            for byte in inner {
                if skip {
                    skip = false
                    continue
                }
                out.append(byte)
                if byte == open { skip = true }
            }
            return String(decoding: out, as: UTF8.self)
        default: return nil
        }
    }
}

/// SQLite's tokenizer (`sqlite3GetToken` in `tokenize.c`), over UTF-8 bytes: where each token ends and what
/// kind it is. Bytes from 0x80 up are identifier characters, as in SQLite.
struct SQLTokenizer: Sequence, IteratorProtocol {
    private let text: [UInt8]
    private var position = 0

    init(_ text: [UInt8]) { self.text = text }

    private func byte(_ index: Int) -> UInt8 { index < text.count ? text[index] : 0 }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x66)
    }
    /// `IdChar`: letters, digits, `_`, `$` and every byte from 0x80.
    private static func isIdentifierCharacter(_ byte: UInt8) -> Bool {
        byte >= 0x80 || isDigit(byte) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x5F || byte == 0x24
    }

    mutating func next() -> SQLToken? {
        guard position < text.count else { return nil }
        let start = position
        let (kind, length) = scan(at: start)
        position = Swift.min(text.count, start + Swift.max(length, 1))
        return SQLToken(kind: kind, range: start..<position)
    }

    // A switch over the cases of tokenize.c, in its order.
    private func scan(at start: Int) -> (SQLToken.Kind, Int) {
        let c = text[start]
        let next = byte(start + 1)
        switch c {
        case 0xEF where next == 0xBB && byte(start + 2) == 0xBF:
            // A UTF-8 byte-order mark starting a token is white space to newer SQLite (CC_BOM), and part of
            // a word to older ones: read as white space, so that a key statement behind one is still seen.
            return (.space, 3)
        case 0x09, 0x0A, 0x0C, 0x0D, 0x20:
            var index = start + 1
            while index < text.count, Self.isSpace(text[index]) { index += 1 }
            return (.space, index - start)
        case UInt8(ascii: "-"):
            if next == UInt8(ascii: "-") {
                var index = start + 2
                while index < text.count, text[index] != 0x0A { index += 1 }
                return (.space, index - start)
            }
            if next == UInt8(ascii: ">") { return (.other, byte(start + 2) == UInt8(ascii: ">") ? 3 : 2) }
            return (.other, 1)
        case UInt8(ascii: "/"):
            guard next == UInt8(ascii: "*") else { return (.other, 1) }
            var index = start + 2
            while index + 1 < text.count, !(text[index] == UInt8(ascii: "*") && text[index + 1] == UInt8(ascii: "/")) {
                index += 1
            }
            // SQLite reads a comment left open as running to the end; so does this, as text it cannot tokenize.
            guard index + 1 < text.count else { return (.illegal, text.count - start) }
            return (.space, index + 2 - start)
        case UInt8(ascii: ";"): return (.semicolon, 1)
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "+"), UInt8(ascii: "*"), UInt8(ascii: "%"),
            UInt8(ascii: ","), UInt8(ascii: "&"), UInt8(ascii: "~"):
            return (.other, 1)
        case UInt8(ascii: "="): return (.other, next == UInt8(ascii: "=") ? 2 : 1)
        case UInt8(ascii: "<"):
            let two = [UInt8(ascii: "="), UInt8(ascii: ">"), UInt8(ascii: "<")].contains(next)
            return (.other, two ? 2 : 1)
        case UInt8(ascii: ">"):
            return (.other, next == UInt8(ascii: "=") || next == UInt8(ascii: ">") ? 2 : 1)
        case UInt8(ascii: "!"): return next == UInt8(ascii: "=") ? (.other, 2) : (.illegal, 1)
        case UInt8(ascii: "|"): return (.other, next == UInt8(ascii: "|") ? 2 : 1)
        case UInt8(ascii: "`"), UInt8(ascii: "'"), UInt8(ascii: "\""):
            var index = start + 1
            while index < text.count {
                if text[index] == c {
                    if byte(index + 1) == c {
                        index += 2
                        continue
                    }
                    return (c == UInt8(ascii: "'") ? .string : .quotedName, index + 1 - start)
                }
                index += 1
            }
            return (.illegal, text.count - start)
        case UInt8(ascii: "."):
            return Self.isDigit(next) ? number(at: start) : (.dot, 1)
        case UInt8(ascii: "0")...UInt8(ascii: "9"):
            return number(at: start)
        case UInt8(ascii: "["):
            var index = start + 1
            while index < text.count, text[index] != UInt8(ascii: "]") { index += 1 }
            return index < text.count ? (.quotedName, index + 1 - start) : (.illegal, text.count - start)
        case UInt8(ascii: "?"):
            var index = start + 1
            while index < text.count, Self.isDigit(text[index]) { index += 1 }
            return (.variable, index - start)
        case UInt8(ascii: "$"), UInt8(ascii: "@"), UInt8(ascii: ":"), UInt8(ascii: "#"):
            return variable(at: start)
        case UInt8(ascii: "x"), UInt8(ascii: "X"):
            guard next == UInt8(ascii: "'") else { return word(at: start) }
            var index = start + 2
            while index < text.count, Self.isHexDigit(text[index]) { index += 1 }
            if index < text.count, text[index] == UInt8(ascii: "'"), (index - start - 2) % 2 == 0 {
                return (.blob, index + 1 - start)
            }
            while index < text.count, text[index] != UInt8(ascii: "'") { index += 1 }
            return (.illegal, Swift.min(text.count, index + 1) - start)
        default:
            return Self.isIdentifierCharacter(c) ? word(at: start) : (.illegal, 1)
        }
    }

    private func word(at start: Int) -> (SQLToken.Kind, Int) {
        var index = start + 1
        while index < text.count, Self.isIdentifierCharacter(text[index]) { index += 1 }
        return (.word, index - start)
    }

    /// Digits (`0x` hex, `.`, exponent, `_` separators of SQLite 3.46); identifier characters straight after
    /// make the whole an illegal token, as in SQLite.
    private func number(at start: Int) -> (SQLToken.Kind, Int) {
        var index = start
        let isDigitOrSeparator = { (byte: UInt8) in Self.isDigit(byte) || byte == UInt8(ascii: "_") }
        if text[index] == UInt8(ascii: "0"), byte(index + 1) | 0x20 == UInt8(ascii: "x"),
            Self.isHexDigit(byte(index + 2))
        {
            index += 2
            while index < text.count, Self.isHexDigit(text[index]) || text[index] == UInt8(ascii: "_") { index += 1 }
        } else {
            while index < text.count, isDigitOrSeparator(text[index]) { index += 1 }
            if byte(index) == UInt8(ascii: ".") {
                index += 1
                while index < text.count, isDigitOrSeparator(text[index]) { index += 1 }
            }
            if byte(index) | 0x20 == UInt8(ascii: "e"),
                Self.isDigit(byte(index + 1))
                    || ((byte(index + 1) == UInt8(ascii: "+") || byte(index + 1) == UInt8(ascii: "-"))
                        && Self.isDigit(byte(index + 2)))
            {
                index += 2
                while index < text.count, Self.isDigit(text[index]) { index += 1 }
            }
        }
        var kind = SQLToken.Kind.number
        while index < text.count, Self.isIdentifierCharacter(text[index]) {
            kind = .illegal
            index += 1
        }
        return (kind, index - start)
    }

    /// `$name`, `@name`, `:name`, `#name`, with TCL's `::` and a `(…)` suffix.
    private func variable(at start: Int) -> (SQLToken.Kind, Int) {
        var index = start + 1
        var count = 0
        var kind = SQLToken.Kind.variable
        while index < text.count {
            let c = text[index]
            if Self.isIdentifierCharacter(c) {
                count += 1
            } else if c == UInt8(ascii: "("), count > 0 {
                repeat {
                    index += 1
                } while index < text.count && !Self.isSpace(text[index])
                    && text[index] != UInt8(ascii: ")")
                if index < text.count, text[index] == UInt8(ascii: ")") { index += 1 } else { kind = .illegal }
                break
            } else if c == UInt8(ascii: ":"), byte(index + 1) == UInt8(ascii: ":") {
                index += 1
            } else {
                break
            }
            index += 1
        }
        return (count == 0 ? .illegal : kind, index - start)
    }
}
