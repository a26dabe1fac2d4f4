import RelayCrypto

/// The relay's AES-256 keys by key id (0...255), from `RELAY_KEYS`.
public struct RelayKeys: Sendable {
    public private(set) var keys: [UInt8: SymmetricKey]

    public init(_ keys: [UInt8: SymmetricKey]) {
        self.keys = keys
    }

    public subscript(id: UInt8) -> SymmetricKey? { keys[id] }

    /// Key ids in ascending order (safe to print: ids are not secret).
    public var ids: [UInt8] { keys.keys.sorted() }
}
