/// An answer to a request. The server adds `Content-Length` and `Date` itself.
public struct HTTPResponse: Sendable {
    /// The status code, for example 200.
    public var status: Int
    /// Header fields to send, in order (`Content-Length` is computed by the server and cannot be set here).
    public var headers: [(name: String, value: String)]
    /// The body bytes (omitted on the wire for `HEAD` requests).
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a JSON body and `content-type: application/json`, followed by any extra headers.
    public static func json(_ status: Int, _ body: String, headers: [(name: String, value: String)] = [])
        -> HTTPResponse
    {
        HTTPResponse(
            status: status, headers: [(name: "content-type", value: "application/json")] + headers,
            body: Array(body.utf8))
    }
}
