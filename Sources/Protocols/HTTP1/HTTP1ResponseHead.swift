/// What the ``HTTP1ResponseReader`` knows about an answer once its head is in.
public struct HTTP1ResponseHead: Sendable, Equatable {
    /// HTTP/1.0 or HTTP/1.1.
    public var version: HTTP1Version
    /// The status, 100 to 599.
    public var status: Int
    /// The reason phrase as sent (printable ASCII; may be empty).
    public var reason: String
    /// The header fields in order (values trimmed of surrounding spaces and tabs).
    public var headers: HTTP1Headers
    /// The declared `Content-Length`, or nil when none was sent; a value past `Int.max` reads as `Int.max`.
    public var contentLength: Int?
    /// Whether the body is chunked (`Transfer-Encoding: chunked`).
    public var isChunked: Bool
    /// Whether the server keeps the connection open after this answer: HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool

    /// Creates a head (the reader builds these; tests may too).
    public init(
        version: HTTP1Version = .http11, status: Int, reason: String = "", headers: HTTP1Headers = HTTP1Headers(),
        contentLength: Int? = nil, isChunked: Bool = false, keepAlive: Bool = true
    ) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.contentLength = contentLength
        self.isChunked = isChunked
        self.keepAlive = keepAlive
    }

    /// The status and its reason as the status line gives them (`407 Proxy Authentication Required`, or `503`
    /// without a reason).
    public var statusLine: String { reason.isEmpty ? "\(status)" : "\(status) \(reason)" }

    /// Whether this is an interim answer (1xx): the final one follows it.
    public var isInterim: Bool { status < 200 }
}
