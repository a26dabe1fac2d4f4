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
