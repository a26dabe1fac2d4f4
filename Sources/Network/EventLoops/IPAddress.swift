import Glibc

/// An IPv4 or IPv6 address, as a connection's peer has it: a value to count connections per address by.
/// Holds its bytes inline (no allocation); an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is IPv4.
///
/// Its `description` never shows the address: addresses are personal data and must not reach a log.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    public enum Family: Sendable, Hashable {
        case ipv4
        case ipv6
    }

    public let family: Family
    /// The 16 bytes of an IPv6 address, or the 4 of an IPv4 address in the last four, in network order.
    private let storage: (UInt64, UInt64)

    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: storage) { raw in Array(family == .ipv4 ? raw[12..<16] : raw[0..<16]) }
    }

    /// Always `"<redacted>"`.
    public var description: String { "<redacted>" }

    /// No children, so that `dump` and debuggers do not show the address either.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// An address from its bytes in network order (4 or 16); nil for another count.
    public init?(bytes: some Collection<UInt8>) {
        var words: (UInt64, UInt64) = (0, 0)
        switch bytes.count {
        case 4:
            withUnsafeMutableBytes(of: &words) { raw in
                for (offset, byte) in bytes.enumerated() { raw[12 + offset] = byte }
            }
            family = .ipv4
        case 16:
            withUnsafeMutableBytes(of: &words) { raw in
                for (offset, byte) in bytes.enumerated() { raw[offset] = byte }
            }
            family = IPAddress.isIPv4Mapped(words) ? .ipv4 : .ipv6
        default:
            return nil
        }
        if family == .ipv4 {
            // One form for an IPv4 address, however it came: zeros, then the four bytes.
            withUnsafeMutableBytes(of: &words) { raw in
                for offset in 0..<12 { raw[offset] = 0 }
            }
        }
        storage = words
    }

    /// Parses a literal such as `"1.2.3.4"` or `"::1"` (no brackets, no port).
    public init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v4) { Array($0) })
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v6) { Array($0) })
        } else {
            return nil
        }
    }

    /// Reads the address of an `AF_INET` or `AF_INET6` socket address, with its port; nil for another family.
    static func read(_ address: UnsafePointer<sockaddr>) -> (IPAddress, port: UInt16)? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                var raw = v4.pointee.sin_addr
                let ip = withUnsafeBytes(of: &raw) { IPAddress(bytes: $0) }
                return ip.map { ($0, UInt16(bigEndian: v4.pointee.sin_port)) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                var raw = v6.pointee.sin6_addr
                let ip = withUnsafeBytes(of: &raw) { IPAddress(bytes: $0) }
                return ip.map { ($0, UInt16(bigEndian: v6.pointee.sin6_port)) }
            }
        default:
            return nil
        }
    }

    private static func isIPv4Mapped(_ words: (UInt64, UInt64)) -> Bool {
        withUnsafeBytes(of: words) { raw in
            raw[0..<10].allSatisfy { $0 == 0 } && raw[10] == 0xff && raw[11] == 0xff
        }
    }

    public static func == (lhs: IPAddress, rhs: IPAddress) -> Bool {
        lhs.family == rhs.family && lhs.storage.0 == rhs.storage.0 && lhs.storage.1 == rhs.storage.1
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.0)
        hasher.combine(storage.1)
    }
}
