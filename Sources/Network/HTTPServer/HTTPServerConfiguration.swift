import TLS

/// How an ``HTTPServer`` listens and which limits it enforces.
public struct HTTPServerConfiguration: Sendable {
    /// The IP address to listen on: `"127.0.0.1"`, `"::1"`, `"0.0.0.0"`, `"::"` (IPv6 and IPv4), or any other literal.
    public var host: String
    /// The port; 0 picks a free one (read it back from ``HTTPServer/port``).
    public var port: UInt16
    /// Workers: event loops on threads of their own, each accepting on its own socket; at least 1.
    public var threads: Int
    /// The most connections open at once, across all clients. Lowered at start if the process's file descriptor
    /// limit cannot hold it (see ``HTTPServer/connectionLimit``).
    public var connectionLimit: Int
    /// The most connections open at once from one client address; 0 means no limit. A connection over this cap or
    /// the global one waits briefly for room once its head is in, then is answered 503 `overloaded` with
    /// `Retry-After` (docs/DESIGN.md, "The HTTP front", Caps).
    public var perAddressConnectionLimit: Int
    /// `server.connection_timeout_s`: the deadline, in seconds, for each of a request head (from its first byte), a
    /// body (from the head's end), the idle wait between requests and the writing of one answer; progress does not
    /// extend it (docs/DESIGN.md, "The HTTP front"). 0 means none. A request waiting for its handler is exempt.
    public var connectionTimeoutSeconds: Int
    /// The largest request line plus headers answered normally; larger: 431 `{"error":"too_large"}`.
    public var maxHeaderBytes: Int
    /// The longest request target (path and query) answered normally; longer: 414 `{"error":"too_large"}`.
    public var maxURLBytes: Int
    /// A listening socket passed to the process (``SocketActivation``), listened on instead of `host` and `port`. The
    /// server owns this descriptor from its start, and never shuts the socket down: when the server stops, only
    /// its descriptors close, and connections still waiting in the socket's backlog stay there for the next process
    /// that holds it.
    public var passedSocket: Int32?
    /// HTTPS: every connection runs through a TLS session made from this context (its handshake inside the first
    /// request's deadline; ``HTTPServer/replaceTLSContext(_:)`` gives later connections another); nil: plain HTTP.
    public var tls: TLSServerContext? = nil

    /// Creates a configuration; every limit has a production default.
    public init(
        host: String = "127.0.0.1",
        port: UInt16 = 0,
        threads: Int = 2,
        connectionLimit: Int = 16_384,
        perAddressConnectionLimit: Int = 64,
        connectionTimeoutSeconds: Int = 30,
        maxHeaderBytes: Int = 8192,
        maxURLBytes: Int = 4096
    ) {
        self.host = host
        self.port = port
        self.threads = threads
        self.connectionLimit = connectionLimit
        self.perAddressConnectionLimit = perAddressConnectionLimit
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURLBytes = maxURLBytes
    }
}
