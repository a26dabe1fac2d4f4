import RelayCrypto

extension LimiterKey {
    /// The address-hash key every instance sharing a limits store derives alike (docs/DESIGN.md,
    /// "Several instances"): HKDF-SHA256 of the relay key with the lowest id, so no new secret is needed.
    public static func sharedAddressSecret(_ keys: RelayKeys) -> [UInt8] {
        guard let lowest = keys.ids.first, let key = keys[lowest] else {
            preconditionFailure("RELAY_KEYS holds at least one key (checked when loading)")
        }
        return key.withUnsafeBytes { bytes in
            HKDFSHA256.deriveKey(from: bytes, info: Array("duo-relay address limiter v1".utf8), count: 32)
        }
    }
}
