import ErrorCodes

/// Why a ``ClientStream`` ended: its code is its ``Kind``. Equal when their kinds (and tunnels) are.
public struct ClientStreamFailure: CodedError, Sendable {
    public enum Kind: String, Sendable, Hashable, CustomStringConvertible {
        /// The host name has no address (the resolver's words in `reason`).
        case resolve
        /// No address of the host took the TCP connection (through a proxy: the proxy gave no tunnel).
        case connect
        /// The server's certificate did not verify (OpenSSL's words for why).
        case certificate
        /// The TLS handshake failed otherwise (no common protocol, the peer closed during it).
        case handshake
        /// The peer closed the connection (a FIN, or TLS close_notify).
        case closedByPeer
        /// The connection was reset or a read or write failed.
        case reset
        /// TLS failed after the handshake (a bad record).
        case tls

        public var description: String { rawValue }
    }

    /// How a proxy failed to open the tunnel, for a stream that goes through one.
    public enum Tunnel: String, Sendable, Hashable, CaseIterable {
        /// The proxy's name did not resolve, or no address of it took the TCP connection.
        case unreachable
        /// The proxy answered `CONNECT` with a status other than 2xx.
        case refused
        /// The proxy's answer is not an HTTP answer, or its head is too large.
        case malformed
        /// The proxy did not answer in time.
        case timeout
        /// The proxy closed or broke the connection before answering.
        case closed
    }

    public let kind: Kind
    /// Human words for a log (the resolver's, the system's, OpenSSL's, a proxy's status line); never other data read
    /// from the peer, nor a secret.
    public let reason: String
    /// Set when the proxy failed to open the tunnel (`kind` is then ``Kind/resolve`` or ``Kind/connect``); `reason`
    /// names the proxy.
    public let tunnel: Tunnel?

    public init(_ kind: Kind, _ reason: String, tunnel: Tunnel? = nil) {
        self.kind = kind
        self.reason = reason
        self.tunnel = tunnel
    }

    /// The kind, to decide by (``ErrorCodes/CodedError``).
    public var code: Kind { kind }

    public var description: String { reason }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.kind == rhs.kind && lhs.tunnel == rhs.tunnel }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(tunnel)
    }
}
