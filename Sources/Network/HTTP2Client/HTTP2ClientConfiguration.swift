/// Where and how an ``HTTP2Client`` connects.
public struct HTTP2ClientConfiguration: Sendable {
    /// The origin every request goes to: `https://host[:port]`, no path (for example
    /// `https://api.push.apple.com` or `https://127.0.0.1:8443`).
    public var origin: String
    /// A PEM file of extra certificate authorities, trusted in addition to the system's roots
    /// (for a local test server). `nil` trusts the system's roots only.
    public var caFile: String?
    /// The most connections open at once to the origin (connections being replaced, which
    /// take no new requests, are not counted). At least 1.
    public var maxConnections: Int
    /// The most requests in flight on one connection; the server's `SETTINGS_MAX_CONCURRENT_STREAMS`
    /// caps it further. At least 1.
    public var maxStreamsPerConnection: Int
    /// How long a new connection may take to connect and finish its TLS handshake.
    public var connectTimeout: Duration
    /// Whether an answer (its HTTP status) proves a new connection: until one does, the connection
    /// carries one request at a time. The default takes any answer. (APNs allows one stream on a
    /// new connection until it has seen a valid provider token: anything but 403.)
    public var provesConnection: @Sendable (Int) -> Bool
    /// Whether an answer says its connection must take no more requests: the connection is then replaced, as after
    /// GOAWAY (its other streams finish). The default: none does. (APNs judges provider token updates per
    /// connection: a connection that refuses a new token as too soon after its last takes it no sooner than
    /// 20 minutes later, and a new connection takes it at once.)
    public var retiresConnection: @Sendable (HTTP2Response) -> Bool
    /// A connection with nothing in flight and nothing received for this long is checked with PING.
    public var pingInterval: Duration
    /// A PING unanswered this long retires its connection (a replacement opens at once).
    public var pingTimeout: Duration
    /// An HTTP proxy every connection goes through (`CONNECT host:port`, TLS inside the tunnel); nil: direct.
    public var proxy: Proxy?
    /// Told of connection problems and recoveries (never about a request), on the client's loop thread;
    /// must return quickly.
    public var onEvent: (@Sendable (HTTP2ClientEvent) -> Void)?

    /// Creates a configuration; see the properties for the meaning of each value.
    public init(
        origin: String, caFile: String? = nil, maxConnections: Int = 2, maxStreamsPerConnection: Int = 500,
        connectTimeout: Duration = .seconds(5), provesConnection: @escaping @Sendable (Int) -> Bool = { _ in true },
        retiresConnection: @escaping @Sendable (HTTP2Response) -> Bool = { _ in false },
        pingInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10),
        proxy: Proxy? = nil, onEvent: (@Sendable (HTTP2ClientEvent) -> Void)? = nil
    ) {
        self.origin = origin
        self.caFile = caFile
        self.maxConnections = maxConnections
        self.maxStreamsPerConnection = maxStreamsPerConnection
        self.connectTimeout = connectTimeout
        self.provesConnection = provesConnection
        self.retiresConnection = retiresConnection
        self.pingInterval = pingInterval
        self.pingTimeout = pingTimeout
        self.proxy = proxy
        self.onEvent = onEvent
    }

    /// An HTTP proxy that allows `CONNECT` to the origin's port.
    public struct Proxy: Sendable, Equatable {
        /// The proxy's host name or IP literal (IPv6 without brackets), and its port.
        public var host: String
        public var port: UInt16
        /// `user:password` for `Proxy-Authorization: Basic`, or nil. Sent to the proxy, never shown.
        public var credentials: String?

        public init(host: String, port: UInt16, credentials: String? = nil) {
            self.host = host
            self.port = port
            self.credentials = credentials
        }

        /// `host:port` (an IPv6 literal in brackets), without credentials.
        public var name: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
    }
}
