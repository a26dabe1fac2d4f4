/// An HTTP answer: the one the relay's server sends, and the one its HTTP/2 client receives (`HTTP2Response`).
/// Pure (no I/O): status, header fields in order, body.
public struct HTTPResponse: Sendable {
    /// The status code, for example 200.
    public var status: Int
    /// Header fields in order. Sent: `Content-Length` is the server's to add, not set here. Received: names
    /// lowercased (HTTP/2), pseudo-headers not included.
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

    /// The value of the first header field called `name` (compared without regard to ASCII case, without
    /// allocating: the relay reads APNs' `apns-id` this way on every push), if any.
    public subscript(header name: String) -> String? {
        headers.first { Self.namesMatch($0.name, name) }?.value
    }

    private static func namesMatch(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8) { x, y in
            (x >= 0x41 && x <= 0x5A ? x | 0x20 : x) == (y >= 0x41 && y <= 0x5A ? y | 0x20 : y)
        }
    }
}
