import Foundation

/// A key slot file as someone who can write to a database's directory could plant beside it: the database's
/// public salt (the first 16 bytes of its header), well-formed passphrase slots with the KDF parameters they
/// choose, random wrapped keys and a random tag. It parses; no secret opens any of its slots.
public enum PlantedSlotFile {
    /// Writes the planted file at `<database>-keyslots` (mode 0600): `count` passphrase slots, each scrypt with
    /// `n`, `r`, `p`. Returns its path.
    @discardableResult
    public static func write(besideDatabaseAt database: String, count: Int, n: UInt64, r: UInt64 = 1, p: UInt64 = 1)
        throws -> String
    {
        let header = try Data(contentsOf: URL(fileURLWithPath: database))
        let salt = hex(header.prefix(16))
        let slots = (1...max(count, 1)).map { id in
            """
            {"created":0,"id":\(id),"kdf":{"n":\(n),"name":"scrypt","p":\(p),"r":\(r),"salt":"\(hex(random(32)))"},\
            "kind":"passphrase","wraps":[{"ciphertext":"\(random(32).base64EncodedString())","generation":1,\
            "nonce":"\(random(12).base64EncodedString())","tag":"\(random(16).base64EncodedString())"}]}
            """
        }
        let body = """
            {"databaseSalt":"\(salt)","generation":1,"slots":[\(slots.joined(separator: ","))],"version":1}
            """
        let text = "fmdb-cipher-keyslots 1\n\(body)\nmac 1 \(hex(random(32)))\n"
        let slotPath = database + "-keyslots"
        try Data(text.utf8).write(to: URL(fileURLWithPath: slotPath))
        chmod(slotPath, 0o600)
        return slotPath
    }

    private static func random(_ count: Int) -> Data {
        Data((0..<count).map { _ in UInt8.random(in: 0...255) })
    }

    private static func hex(_ data: Data) -> String {
        data.map { String(format: "%02x", $0) }.joined()
    }
}
