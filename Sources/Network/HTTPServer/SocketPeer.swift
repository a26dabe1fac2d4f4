import Glibc

/// The address of a connected client, as the socket reports it.
///
/// Its `description` never shows the address: addresses are personal data and must not reach a log.
public struct SocketPeer: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The address family.
    public enum Family: Sendable, Hashable {
        case ipv4
        case ipv6
    }

    /// The address family; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) counts as IPv4.
    public let family: Family
    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public let bytes: [UInt8]

    /// Always `"<redacted>"`.
    public var description: String { "<redacted>" }

    /// No children, so that `dump` and debuggers do not show the address either.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// Creates a peer from raw address bytes (4 or 16, network order); an IPv4-mapped IPv6 address becomes IPv4.
    /// Returns nil for any other length.
    public init?(bytes: [UInt8]) {
        switch bytes.count {
        case 4:
            self.family = .ipv4
            self.bytes = bytes
        case 16:
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                self.family = .ipv4
                self.bytes = Array(bytes[12..<16])
            } else {
                self.family = .ipv6
                self.bytes = bytes
            }
        default:
            return nil
        }
    }

    /// Parses a textual address such as `"1.2.3.4"`, `"::1"` or `"2001:db8::1"` (no brackets, no port).
    public static func parse(_ text: some StringProtocol) -> SocketPeer? {
        let string = String(text)
        var v4 = in_addr()
        if inet_pton(AF_INET, string, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { SocketPeer(bytes: Array($0)) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, string, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { SocketPeer(bytes: Array($0)) }
        }
        return nil
    }

    /// Reads the peer from a socket address (`AF_INET` or `AF_INET6`); nil for any other family.
    init?(socketAddress address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) }
            }
            self.init(bytes: bytes)
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) }
            }
            self.init(bytes: bytes)
        default:
            return nil
        }
    }
}
