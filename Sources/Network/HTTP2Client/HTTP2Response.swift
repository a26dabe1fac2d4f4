/// The server's answer to an ``HTTP2Request``: any HTTP status counts as an answer.
public struct HTTP2Response: Sendable {
    /// The status code (`:status`), for example 200.
    public var status: Int
    /// Header fields in order, names lowercased as HTTP/2 carries them; pseudo-headers not included.
    public var headers: [(name: String, value: String)]
    /// The body bytes.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
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
