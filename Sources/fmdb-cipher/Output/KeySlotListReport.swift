import FMDB
import Foundation

/// What `keys list` says: the slots (ids, kinds, KDFs, creation times; never a secret). With `--json` an array of
/// one object a slot; the text is a table.
struct KeySlotListReport: Report {
    /// A slot as `keys list` says it.
    struct Slot: Encodable {
        let id: Int
        let kind: String
        let kdf: String
        /// When the slot was made, in ISO 8601 (UTC).
        let created: String
    }

    let slots: [Slot]

    init(_ slots: [KeySlotInfo]) {
        let formatter = ISO8601DateFormatter()
        self.slots = slots.map {
            Slot(id: $0.id, kind: $0.kind.rawValue, kdf: $0.kdf, created: formatter.string(from: $0.created))
        }
    }

    /// The JSON is the array itself.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(slots)
    }

    var lines: [String] {
        RowFormat.table(
            columns: ["id", "kind", "kdf", "created"], rows: slots.map { [String($0.id), $0.kind, $0.kdf, $0.created] })
    }
}
