/// One HTTP/2 request, sent to the client's origin.
public struct HTTP2Request: Sendable {
    /// The method, for example `POST`.
    public var method: String
    /// The path and query, starting with `/`.
    public var path: String
    /// Header fields in order. Names are sent lowercased (HTTP/2); a field must not contain
    /// CR, LF or NUL, and pseudo-headers (`:path`…) are not accepted here.
    public var headers: [(name: String, value: String)]
    /// The request body (empty: none).
    public var body: [UInt8]
    /// The deadline of the whole request, from `send` to the answer, time spent queued included.
    public var timeout: Duration

    /// Creates a request; see the properties for the meaning of each value.
    public init(
        method: String = "POST", path: String, headers: [(name: String, value: String)] = [], body: [UInt8] = [],
        timeout: Duration = .seconds(10)
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}
