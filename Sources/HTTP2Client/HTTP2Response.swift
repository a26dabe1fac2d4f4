/// The server's answer to an ``HTTP2Request``: any HTTP status counts as an answer.
public struct HTTP2Response: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The response header fields in order, names lowercased (pseudo-headers not included).
    public var headers: [(name: String, value: String)]
    /// The response body.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header field called `name` (compared case-insensitively), if any.
    public subscript(header name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name == wanted }?.value
    }
}
