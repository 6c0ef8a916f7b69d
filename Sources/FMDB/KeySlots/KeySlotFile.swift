import Foundation

/// The slot file beside a slotted database (`<database>-keyslots`): its format, and the slot
/// operations that need only the file and a secret (unwrap, wrap, seal the whole-file tag).
///
/// Format (version 1), UTF-8 text, three parts:
/// ```
/// fmdb-cipher-keyslots 1
/// {"databaseSalt":"<32 hex>","generation":1,"slots":[{"id":1,"kind":"passphrase","created":...,
///   "kdf":{"name":"scrypt","n":32768,"r":8,"p":1,"salt":"<64 hex>"},
///   "wraps":[{"generation":1,"nonce":"<b64>","ciphertext":"<b64>","tag":"<b64>"}]}],"version":1}
/// mac 1 <64 hex>
/// ```
/// Each wrap is the 32-byte data key sealed with AES-256-GCM under the slot's key-encryption key; its
/// associated data binds the format version, the database's 16-byte salt, the slot id, the data key
/// generation, the slot kind, its KDF parameters and its creation time. The `mac` line is
/// HMAC-SHA256 of the first two lines under a key derived from the data key of that generation: a
/// change anywhere in the file is detected by whoever unlocks any slot. During a data key rotation a
/// file holds two generations (two wraps per slot and two `mac` lines).
struct KeySlotFile: Equatable {
    static let magic = "fmdb-cipher-keyslots"
    static let version = 1
    static let maximumSize = 1 << 20
    /// The most slots a file may hold: each unlock may try every slot of a kind (one KDF each).
    static let maximumSlots = 64
    /// Slot ids are 1 ... 2^31 - 1 (4 bytes of the associated data).
    static let maximumSlotID = Int(Int32.max)
    /// Data key generations are 1 ... 2^31 - 1 (a rotation adds one).
    static let maximumGeneration = Int(Int32.max)

    struct KDFParameters: Codable, Equatable {
        /// "scrypt", "pbkdf2-sha512" (passphrases) or "hmac-sha256" (raw and recovery keys).
        var name: String
        var n: UInt64?
        var r: UInt64?
        var p: UInt64?
        var iterations: Int?
        /// 32 random bytes, hexadecimal.
        var salt: String

        var canonical: String {
            "\(name):\(n ?? 0):\(r ?? 0):\(p ?? 0):\(iterations ?? 0):\(salt)"
        }
    }

    struct Wrap: Codable, Equatable {
        var generation: Int
        var nonce: Data
        var ciphertext: Data
        var tag: Data
    }

    struct Slot: Codable, Equatable {
        var id: Int
        var kind: String
        /// Seconds since 1970.
        var created: Int64
        var kdf: KDFParameters
        var wraps: [Wrap]
    }

    struct Body: Codable, Equatable {
        var version: Int
        var databaseSalt: String
        /// The data key generation the database is keyed with (when no rotation is pending).
        var generation: Int
        /// Set while a data key rotation is under way: the new generation; the database is keyed with
        /// one of the two.
        var pendingGeneration: Int?
        var slots: [Slot]
    }

    var body: Body

    var databaseSalt: Data? { Data(hex: body.databaseSalt) }

    /// The generations the file holds wraps for (one, or two during a rotation).
    var generations: [Int] {
        [body.generation] + (body.pendingGeneration.map { [$0] } ?? [])
    }

    // MARK: - Reading and writing

    static func path(forDatabaseAt databasePath: String) -> String {
        databasePath + "-keyslots"
    }

    /// Parses the file's bytes, checking their shape (not yet the tag: that needs the data key).
    /// Returns the body and the tags by generation.
    static func parse(_ data: Data) throws -> (file: KeySlotFile, signed: Data, macs: [Int: Data]) {
        guard data.count <= maximumSize else { throw corrupt("it is larger than \(maximumSize) bytes") }
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard lines.count >= 4, lines.last?.isEmpty == true,
            String(decoding: lines[0], as: UTF8.self) == "\(magic) \(version)"
        else {
            if let first = lines.first, String(decoding: first, as: UTF8.self).hasPrefix(magic + " ") {
                throw corrupt("it is truncated, or of a format version this library does not read")
            }
            throw corrupt("it is not a key slot file, or it is truncated")
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(lines[1]))
        } catch {
            throw corrupt("its slot list cannot be read")
        }
        var macs: [Int: Data] = [:]
        for line in lines[2..<(lines.count - 1)] {
            let parts = String(decoding: line, as: UTF8.self).split(separator: " ")
            guard parts.count == 3, parts[0] == "mac", let generation = Int(parts[1]),
                let mac = Data(hex: String(parts[2])), mac.count == 32
            else {
                throw corrupt("its tag line cannot be read")
            }
            macs[generation] = mac
        }
        let file = KeySlotFile(body: body)
        try file.validateShape()
        guard Set(macs.keys) == Set(file.generations) else { throw corrupt("its tags do not match its generations") }
        let signed = Data(lines[0]) + Data([UInt8(ascii: "\n")]) + Data(lines[1])
        return (file, signed, macs)
    }

    /// The file's bytes, tagged with each generation's data key.
    func serialized(dataKeys: [Int: SecureBytes]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = try encoder.encode(body)
        let signed = Data("\(Self.magic) \(Self.version)\n".utf8) + json
        var out = signed + Data("\n".utf8)
        for generation in generations {
            guard let key = dataKeys[generation] else {
                throw FMDatabaseError.misuse("Internal: no data key for generation \(generation).")
            }
            let mac = try Self.mac(signed, dataKey: key)
            out += Data("mac \(generation) \(mac.hexString)\n".utf8)
        }
        return out
    }

    /// Whether `macs` holds the right tag for `generation` under `dataKey`.
    static func verify(_ signed: Data, macs: [Int: Data], generation: Int, dataKey: SecureBytes) throws -> Bool {
        guard let expected = macs[generation] else { return false }
        let actual = try mac(signed, dataKey: dataKey)
        return SecureBytes(actual).isEqual(to: SecureBytes(expected))
    }

    private static func mac(_ signed: Data, dataKey: SecureBytes) throws -> Data {
        let macKey = try KeySlotCrypto.hmacSHA256(key: dataKey, Data("fmdb-cipher-keyslots/1 file tag".utf8))
        return try KeySlotCrypto.hmacSHA256(key: macKey, signed).withUnsafeBytes { Data($0) }
    }

    private func validateShape() throws {
        guard body.version == Self.version else { throw Self.corrupt("its version field is not \(Self.version)") }
        guard let salt = databaseSalt, salt.count == 16 else { throw Self.corrupt("its database salt is malformed") }
        guard !body.slots.isEmpty else { throw Self.corrupt("it holds no slot") }
        guard body.generation > 0, body.pendingGeneration.map({ $0 > body.generation }) ?? true else {
            throw Self.corrupt("its data key generations are not in order")
        }
        guard body.generation <= Self.maximumGeneration, (body.pendingGeneration ?? 0) <= Self.maximumGeneration else {
            throw Self.corrupt("its data key generation is out of range")
        }
        guard body.slots.count <= Self.maximumSlots else {
            throw Self.corrupt("it holds more than \(Self.maximumSlots) slots")
        }
        guard Set(body.slots.map(\.id)).count == body.slots.count else { throw Self.corrupt("two slots share an id") }
        for slot in body.slots {
            // Ids go into the associated data as 4 bytes, and the next id is the largest plus one.
            guard slot.id > 0, slot.id <= Self.maximumSlotID else { throw Self.corrupt("a slot id is out of range") }
            guard let kind = KeySlotKind(rawValue: slot.kind) else {
                throw Self.corrupt("slot \(slot.id) is of an unknown kind")
            }
            guard Data(hex: slot.kdf.salt)?.count == 32 else {
                throw Self.corrupt("slot \(slot.id) has a malformed salt")
            }
            if let problem = KeySlotKDFBounds.problem(with: slot.kdf, kind: kind) {
                throw Self.corrupt("slot \(slot.id) has unusable key derivation parameters (\(problem))")
            }
            guard Set(slot.wraps.map(\.generation)) == Set(generations), slot.wraps.count == generations.count else {
                throw Self.corrupt("slot \(slot.id) does not wrap the data key of every generation")
            }
            for wrap in slot.wraps
            where wrap.nonce.count != KeySlotCrypto.nonceLength
                || wrap.tag.count != KeySlotCrypto.tagLength || wrap.ciphertext.count != KeySlotCrypto.dataKeyLength
            {
                throw Self.corrupt("slot \(slot.id) has a malformed wrapped key")
            }
        }
    }

    static func corrupt(_ reason: String) -> FMDatabaseError {
        FMDatabaseError(
            code: SQLITE_CORRUPT, message: "The key slot file is damaged or was altered: \(reason).",
            marks: [.damagedKeySlotFile])
    }

    // MARK: - Slots

    /// The associated data of one wrap: what it is bound to.
    func associatedData(slot: Slot, generation: Int) -> Data {
        var aad = Data("fmdb-cipher-keyslots/\(Self.version)\u{0}".utf8)
        aad += databaseSalt ?? Data()
        aad += Data([
            UInt8(truncatingIfNeeded: slot.id >> 24), UInt8(truncatingIfNeeded: slot.id >> 16),
            UInt8(truncatingIfNeeded: slot.id >> 8), UInt8(truncatingIfNeeded: slot.id),
        ])
        aad += Data("\u{0}\(generation)\u{0}\(slot.kind)\u{0}\(slot.kdf.canonical)\u{0}\(slot.created)".utf8)
        return aad
    }

    /// A new slot for `secret` wrapping `dataKeys` (by generation), and the slot's key-encryption key.
    func makeSlot(id: Int, secret: KeySlotSecret, kdf: KeySlotKDF, dataKeys: [Int: SecureBytes]) throws -> Slot {
        let salt = try secureRandomBytes(32).withUnsafeBytes { Data($0).hexString }
        let parameters: KDFParameters
        switch secret.kind {
        case .passphrase:
            try kdf.validate()
            switch kdf.algorithm {
            case .scrypt(let n, let r, let p):
                parameters = KDFParameters(name: "scrypt", n: n, r: r, p: p, iterations: nil, salt: salt)
            case .pbkdf2SHA512(let iterations):
                parameters = KDFParameters(
                    name: "pbkdf2-sha512", n: nil, r: nil, p: nil, iterations: iterations, salt: salt)
            }
        case .rawKey, .recoveryKey:
            parameters = KDFParameters(name: "hmac-sha256", n: nil, r: nil, p: nil, iterations: nil, salt: salt)
        }
        var slot = Slot(
            id: id, kind: secret.kind.rawValue, created: Int64(Date().timeIntervalSince1970),
            kdf: parameters, wraps: [])
        let kek = try Self.keyEncryptionKey(for: secret, parameters: parameters)
        for generation in generations {
            guard let dataKey = dataKeys[generation] else {
                throw FMDatabaseError.misuse("Internal: no data key for generation \(generation).")
            }
            let sealed = try KeySlotCrypto.seal(
                dataKey, key: kek, aad: associatedData(slot: slot, generation: generation))
            slot.wraps.append(
                Wrap(generation: generation, nonce: sealed.nonce, ciphertext: sealed.ciphertext, tag: sealed.tag))
        }
        return slot
    }

    /// Re-wraps the data keys of `generations` in `slot` under the key-encryption key `kek` (rotation).
    func rewrap(_ slot: Slot, kek: SecureBytes, dataKeys: [Int: SecureBytes]) throws -> Slot {
        var slot = slot
        slot.wraps = []
        for generation in generations {
            guard let dataKey = dataKeys[generation] else {
                throw FMDatabaseError.misuse("Internal: no data key for generation \(generation).")
            }
            let sealed = try KeySlotCrypto.seal(
                dataKey, key: kek, aad: associatedData(slot: slot, generation: generation))
            slot.wraps.append(
                Wrap(generation: generation, nonce: sealed.nonce, ciphertext: sealed.ciphertext, tag: sealed.tag))
        }
        return slot
    }

    /// The outcome of unlocking: which slot opened, its key-encryption key, and the data key of each generation.
    struct Unlocked {
        let slotID: Int
        let kek: SecureBytes
        let dataKeys: [Int: SecureBytes]
    }

    /// Tries `secret` on every slot of its kind (or only `slotID`); nil when none opens. Callers that have not
    /// verified the file's tag bound the loop first (`KeySlotWorkBudget.check`).
    func unlock(with secret: KeySlotSecret, slotID: Int? = nil) throws -> Unlocked? {
        for slot in body.slots where slot.kind == secret.kind.rawValue && (slotID == nil || slot.id == slotID) {
            KeySlotWorkBudget.meter?.record(slot.kdf)
            let kek = try Self.keyEncryptionKey(for: secret, parameters: slot.kdf)
            var keys: [Int: SecureBytes] = [:]
            for wrap in slot.wraps {
                guard
                    let key = try KeySlotCrypto.open(
                        ciphertext: wrap.ciphertext, nonce: wrap.nonce, tag: wrap.tag, key: kek,
                        aad: associatedData(slot: slot, generation: wrap.generation)
                    )
                else { break }
                keys[wrap.generation] = key
            }
            if keys.count == slot.wraps.count { return Unlocked(slotID: slot.id, kek: kek, dataKeys: keys) }
        }
        return nil
    }

    /// The ids of every slot `secret` opens (one key derivation per slot of its kind).
    func slotIDs(openedBy secret: KeySlotSecret) throws -> [Int] {
        try body.slots.filter { $0.kind == secret.kind.rawValue }.compactMap { slot in
            try unlock(with: secret, slotID: slot.id) == nil ? nil : slot.id
        }
    }

    /// The key-encryption key of `secret` under a slot's parameters.
    static func keyEncryptionKey(for secret: KeySlotSecret, parameters: KDFParameters) throws -> SecureBytes {
        guard let salt = Data(hex: parameters.salt), salt.count == 32 else {
            throw corrupt("a slot has a malformed salt")
        }
        switch (secret.kind, parameters.name) {
        case (.passphrase, "scrypt"):
            guard KeySlotKDFBounds.problem(with: parameters, kind: .passphrase) == nil,
                let n = parameters.n, let r = parameters.r, let p = parameters.p
            else {
                throw corrupt("a slot has unusable scrypt parameters")
            }
            return try KeySlotCrypto.scrypt(secret.bytes, salt: salt, n: n, r: r, p: p)
        case (.passphrase, "pbkdf2-sha512"):
            guard KeySlotKDFBounds.problem(with: parameters, kind: .passphrase) == nil,
                let iterations = parameters.iterations
            else {
                throw corrupt("a slot has unusable PBKDF2 parameters")
            }
            return try KeySlotCrypto.pbkdf2SHA512(secret.bytes, salt: salt, iterations: iterations)
        case (.rawKey, "hmac-sha256"), (.recoveryKey, "hmac-sha256"):
            return try KeySlotCrypto.hmacSHA256(
                key: secret.bytes, Data("fmdb-cipher-keyslots/1 \(secret.kind.rawValue)\u{0}".utf8) + salt)
        default:
            throw corrupt("a slot's key derivation does not fit its kind")
        }
    }
}

/// The KDF parameters a key slot may have, checked with no arithmetic that can trap: on every slot read
/// from disk (before any key derivation, allocation or tag check) and on every slot made.
enum KeySlotKDFBounds {
    /// scrypt N: a power of two from 2^14 (the floor) to 2^22.
    static let scryptN: ClosedRange<UInt64> = (1 << 14)...(1 << 22)
    /// scrypt r and p: each 1 ..< 2^16.
    static let scryptRP: Range<UInt64> = 1..<(1 << 16)
    /// scrypt r·p stays below 2^30 (RFC 7914).
    static let scryptRTimesPLimit: UInt64 = 1 << 30
    /// scrypt memory, 128·r·(N + p + 2) bytes: at most 4 GiB + 16 MiB (N = 2^22, r = 8 needs 4 GiB).
    static let scryptMemoryLimit: UInt64 = (1 << 32) + (1 << 24)
    /// scrypt work, N·r·p: at most 2^25, the work of N = 2^22, r = 8, p = 1 (seconds, not hours: a slot
    /// file may hold 64 slots, each tried in turn, and whoever can write it chooses their parameters).
    static let scryptWorkLimit: UInt64 = 1 << 25
    /// PBKDF2-HMAC-SHA512 iterations: from 1,000 (the lowest even `unsafePBKDF2SHA512` makes) to 10^7
    /// (seconds per slot, for the same reason).
    static let pbkdf2Iterations: ClosedRange<Int> = 1_000...10_000_000

    /// What is wrong with scrypt `n`, `r`, `p`; nil when they are within bounds.
    static func scryptProblem(n: UInt64, r: UInt64, p: UInt64) -> String? {
        guard scryptN.contains(n), n & (n - 1) == 0 else { return "scrypt N must be a power of two from 2^14 to 2^22" }
        guard scryptRP.contains(r), scryptRP.contains(p) else { return "scrypt r and p must be 1 to 65535" }
        // RFC 7914: N < 2^(16·r), which OpenSSL enforces at derivation; only r = 1 can break it here.
        guard r >= 2 || n < 1 << 16 else { return "scrypt N must be below 2^(16 r): below 2^16 when r is 1" }
        let rp = r.multipliedReportingOverflow(by: p)
        guard !rp.overflow, rp.partialValue < scryptRTimesPLimit else { return "scrypt r times p must be below 2^30" }
        let work = n.multipliedReportingOverflow(by: rp.partialValue)
        guard !work.overflow, work.partialValue <= scryptWorkLimit else {
            return "scrypt N times r times p must be at most 2^25"
        }
        let blocks = n.addingReportingOverflow(p + 2)
        let perBlock = r.multipliedReportingOverflow(by: 128)
        let memory = blocks.partialValue.multipliedReportingOverflow(by: perBlock.partialValue)
        guard !blocks.overflow, !perBlock.overflow, !memory.overflow, memory.partialValue <= scryptMemoryLimit else {
            return "scrypt would need more than 4 GiB"
        }
        return nil
    }

    /// What is wrong with a PBKDF2 iteration count; nil when it is within bounds.
    static func pbkdf2Problem(iterations: Int) -> String? {
        pbkdf2Iterations.contains(iterations) ? nil : "PBKDF2 iterations must be from 1,000 to 10,000,000"
    }

    /// What is wrong with a stored slot's KDF for its kind; nil when it is usable.
    static func problem(with kdf: KeySlotFile.KDFParameters, kind: KeySlotKind) -> String? {
        switch (kind, kdf.name) {
        case (.passphrase, "scrypt"):
            guard let n = kdf.n, let r = kdf.r, let p = kdf.p, kdf.iterations == nil else {
                return "scrypt needs N, r and p only"
            }
            return scryptProblem(n: n, r: r, p: p)
        case (.passphrase, "pbkdf2-sha512"):
            guard let iterations = kdf.iterations, kdf.n == nil, kdf.r == nil, kdf.p == nil else {
                return "PBKDF2 needs an iteration count only"
            }
            return pbkdf2Problem(iterations: iterations)
        case (.rawKey, "hmac-sha256"), (.recoveryKey, "hmac-sha256"):
            return kdf.n == nil && kdf.r == nil && kdf.p == nil && kdf.iterations == nil
                ? nil : "HMAC-SHA256 takes no parameters"
        default:
            return "the key derivation does not fit the slot's kind"
        }
    }
}

extension Data {
    /// Bytes from hexadecimal text; nil when it is not an even number of hex digits.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.init(bytes)
    }

    /// Lower-case hexadecimal.
    var hexString: String {
        var digits = [UInt8](repeating: 0, count: 2 * count)
        digits.withUnsafeMutableBytes { out in
            _ = withUnsafeBytes { HexDigits.lowercase.write($0, into: out, at: 0) }
        }
        return String(decoding: digits, as: UTF8.self)
    }
}
