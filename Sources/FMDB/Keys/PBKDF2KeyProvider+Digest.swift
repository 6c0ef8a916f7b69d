extension PBKDF2KeyProvider.Digest {
    /// The same digest as OpenSSL/'s key derivation names it (the layers below Keys/ name no type of
    /// theirs: README, "Layout").
    var keyDerivationDigest: KeyDerivation.Digest {
        switch self {
        case .sha1: .sha1
        case .sha256: .sha256
        case .sha512: .sha512
        }
    }
}
