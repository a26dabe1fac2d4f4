/// Something that happened to one of a client's connections: a problem reaching the origin, or
/// a connection that works. Never about a request: it carries no path, header or body.
public struct HTTP2ClientEvent: Sendable, Equatable, CustomStringConvertible {
    /// The kind of event.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The host name did not resolve (`detail`: the resolver's text).
        public static let cannotResolve = Kind("cannotResolve")
        /// No TCP connection (`detail`: the errno text, or a timeout).
        public static let cannotConnect = Kind("cannotConnect")
        /// The server's certificate was not accepted (`detail`: OpenSSL's reason).
        public static let tlsVerificationFailed = Kind("tlsVerificationFailed")
        /// The TLS handshake failed otherwise (`detail`: OpenSSL's error).
        public static let tlsFailed = Kind("tlsFailed")
        /// The server did not agree to HTTP/2 (ALPN h2).
        public static let alpnRefused = Kind("alpnRefused")
        /// The server sent GOAWAY (`detail`: the `reason` of its debug data, or its error code).
        public static let goaway = Kind("goaway")
        /// A PING went unanswered: the connection was retired.
        public static let pingUnanswered = Kind("pingUnanswered")
        /// The proxy could not be resolved or reached (`detail` names it and says why).
        public static let proxyUnreachable = Kind("proxyUnreachable")
        /// The proxy refused the tunnel (`detail` names it and its status line).
        public static let proxyRefused = Kind("proxyRefused")
        /// The proxy's answer to `CONNECT` was not valid HTTP, or too large (`detail` names it and the rule).
        public static let proxyMalformed = Kind("proxyMalformed")
        /// The proxy did not answer `CONNECT` in time.
        public static let proxyTimeout = Kind("proxyTimeout")
        /// The proxy closed the connection before opening the tunnel.
        public static let proxyClosed = Kind("proxyClosed")
        /// Every kind that says the proxy gave no tunnel.
        public static let proxyKinds: [Kind] = [
            proxyUnreachable, proxyRefused, proxyMalformed, proxyTimeout, proxyClosed,
        ]
        /// A connection is up (TLS and HTTP/2 agreed).
        public static let connected = Kind("connected")
        /// A connection answered a request that proves it (see `provesConnection`).
        public static let proven = Kind("proven")
    }

    public let kind: Kind
    /// Text from the system, OpenSSL or the server; never from a request.
    public let detail: String

    public init(_ kind: Kind, _ detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { detail.isEmpty ? "\(kind)" : "\(kind): \(detail)" }
}
