import ArgumentParser
import FMDB
import Foundation

extension KDF {
    /// The slot secret this kind of key is: a raw key, a recovery key, or (otherwise) a passphrase.
    func slotSecret(_ material: KeyMaterial) throws -> KeySlotSecret {
        if self == .raw || self == .slotRaw { return try KDF.rawKey { try .rawKey(material: material) } }
        do {
            switch self {
            case .slotRecovery: return try .recoveryKey(material: material)
            default: return .passphrase(material: material)
            }
        } catch {
            throw CLIError.usage((error as NSError).localizedDescription)
        }
    }
}
