/// The HTTP version of a request: HTTP/1.0 or HTTP/1.1 (the parser refuses any other with 505).
public struct HTTP1Version: Hashable, Sendable, CustomStringConvertible {
    /// The minor version: 0 or 1.
    public let minor: UInt8

    public static let http10 = HTTP1Version(minor: 0)
    public static let http11 = HTTP1Version(minor: 1)

    public var description: String { "HTTP/1.\(minor)" }
}

/// What the parser knows about a request once its head is in.
public struct HTTP1RequestHead: Sendable, Equatable {
    /// The method as sent (a token: `GET`, `POST`, or any other).
    public var method: String
    /// The request target as sent (origin form, or absolute form with its scheme and authority).
    public var target: String
    /// The target's path, percent-decoded, without the query string; for an absolute-form target, the path after
    /// its authority (`/` when it has none). Invalid UTF-8 after decoding reads as U+FFFD.
    public var path: String
    /// HTTP/1.0 or HTTP/1.1.
    public var version: HTTP1Version
    /// The header fields in order (values trimmed of surrounding spaces and tabs).
    public var headers: HTTP1Headers
    /// The declared `Content-Length`, or nil when none was sent; a value past `Int.max` reads as `Int.max`
    /// (over every limit, never wrapped).
    public var contentLength: Int?
    /// Whether the body is chunked (`Transfer-Encoding: chunked`).
    public var isChunked: Bool
    /// Whether the connection may carry another request after this one: HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive`.
    public var keepAlive: Bool
    /// Whether the client waits for `100 Continue` before sending its body (`Expect: 100-continue`, HTTP/1.1).
    public var expectsContinue: Bool

    /// Creates a head (the parser builds these; tests of handlers may too).
    public init(
        method: String, target: String, path: String, version: HTTP1Version = .http11,
        headers: HTTP1Headers = HTTP1Headers(), contentLength: Int? = nil, isChunked: Bool = false,
        keepAlive: Bool = true, expectsContinue: Bool = false
    ) {
        self.method = method
        self.target = target
        self.path = path
        self.version = version
        self.headers = headers
        self.contentLength = contentLength
        self.isChunked = isChunked
        self.keepAlive = keepAlive
        self.expectsContinue = expectsContinue
    }

    /// Whether a body follows the head (chunked, or a declared length above zero).
    public var hasBody: Bool { isChunked || (contentLength ?? 0) > 0 }
}
