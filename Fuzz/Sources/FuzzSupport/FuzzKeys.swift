import RelayCore
import RelayCrypto

/// Fixed relay keys, so that the seed corpus can hold real grants. Ids 0, 1 and 255 exist; every
/// other id is unknown.
public enum FuzzKeys {
    public static let keyIDs: [UInt8] = [0, 1, 255]

    /// The 32 key bytes for `id`: a simple pattern, distinct per id.
    public static func bytes(for id: UInt8) -> [UInt8] {
        (0..<32).map { UInt8(truncatingIfNeeded: Int($0) &* 7 &+ Int(id) &* 31 &+ 3) }
    }

    public static let relayKeys: RelayKeys = {
        var keys: [UInt8: SymmetricKey] = [:]
        for id in keyIDs {
            // 32 bytes is always a valid key size.
            keys[id] = try! SymmetricKey(bytes: bytes(for: id))
        }
        return RelayKeys(keys)
    }()

    /// A key that no id names, for sealing grants whose key id is unknown.
    public static let strayKey = try! SymmetricKey(bytes: [UInt8](repeating: 0xA5, count: 32))

    /// The clock and lifetime the text-mode grant fuzzing opens with.
    public static let now: UInt64 = 1_790_000_000
    public static let lifetime: UInt64 = 2_592_000
}
