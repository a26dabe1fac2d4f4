/// Takes structured values off the front of a fuzz input; short input reads as zeros.
public struct ByteReader {
    private var bytes: ArraySlice<UInt8>

    public init(_ bytes: some Collection<UInt8>) { self.bytes = ArraySlice(bytes) }

    public var remaining: [UInt8] { Array(bytes) }

    public mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out = Array(bytes.prefix(count))
        bytes = bytes.dropFirst(count)
        out += [UInt8](repeating: 0, count: count - out.count)
        return out
    }

    /// Big-endian.
    public mutating func uint64() -> UInt64 {
        bytes(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}
