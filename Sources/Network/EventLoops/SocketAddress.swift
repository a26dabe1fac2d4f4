import CUV
import Glibc

/// An IPv4 or IPv6 literal with a port, as a `sockaddr` for bind and connect.
struct SocketAddress {
    private(set) var storage = sockaddr_storage()
    let family: Int32
    /// Brackets are accepted around an IPv6 literal (`[::1]`).
    let literal: String

    init(host: String, port: UInt16) throws(LoopError) {
        var literal = host
        if literal.hasPrefix("[") && literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
        self.literal = literal
        let v4 = withUnsafeMutableBytes(of: &storage) { raw in
            uv_ip4_addr(literal, Int32(port), raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self))
        }
        if v4 == 0 {
            family = AF_INET
            return
        }
        let v6 = withUnsafeMutableBytes(of: &storage) { raw in
            uv_ip6_addr(literal, Int32(port), raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self))
        }
        guard v6 == 0 else { throw LoopError(.invalidAddress, "host \"\(host)\" is not an IPv4 or IPv6 address") }
        family = AF_INET6
    }

    var length: socklen_t {
        socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
    }

    /// The IPv6 wildcard `::`, which also accepts IPv4 when the socket is not IPv6-only.
    var isIPv6Wildcard: Bool {
        guard family == AF_INET6 else { return false }
        return withUnsafeBytes(of: storage) { raw in
            let offset = MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)!
            return raw[offset..<offset + MemoryLayout<in6_addr>.size].allSatisfy { $0 == 0 }
        }
    }

    func withSocketAddress<Result>(_ body: (UnsafePointer<sockaddr>) -> Result) -> Result {
        withUnsafeBytes(of: storage) { raw in body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)) }
    }

    /// How a log names the endpoint (a configured listening address, never a peer's).
    func endpoint(port: UInt16) -> String {
        family == AF_INET6 ? "[\(literal)]:\(port)" : "\(literal):\(port)"
    }
}
