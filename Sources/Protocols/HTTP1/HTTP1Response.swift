/// An answer to a request. The connection adds `content-length` and, when it will close, `connection: close`.
public struct HTTP1Response: Sendable, Equatable {
    /// The status code, for example 200.
    public var status: Int
    /// Header fields to send, in order. `content-length`, `transfer-encoding` and `connection` are the
    /// connection's own and are not sent from here; a field whose name is not a token or whose value holds a
    /// control byte is dropped, so that no answer can carry a line break a client did not expect.
    public var headers: [HTTP1Headers.Field]
    /// The body bytes (omitted on the wire for `HEAD` requests).
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [HTTP1Headers.Field] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a JSON body and `content-type: application/json`, followed by any extra headers.
    public static func json(_ status: Int, _ body: String, headers: [HTTP1Headers.Field] = []) -> HTTP1Response {
        HTTP1Response(
            status: status, headers: [HTTP1Headers.Field(name: "content-type", value: "application/json")] + headers,
            body: Array(body.utf8))
    }

    /// The relay's JSON answer to a refused request (`{"error":"bad_request"}`, `too_large`, `not_implemented`,
    /// `version_not_supported`), for a shell that answers a refusal without its handler.
    public static func refusal(_ error: HTTP1ParseError) -> HTTP1Response {
        .json(error.status, #"{"error":""# + error.code.errorName + #""}"#)
    }

    /// The answer to a connection over a cap (docs/DESIGN.md, "The HTTP front", Caps): 503 `overloaded` with
    /// `Retry-After`; nothing of the request was processed.
    public static func overloaded(retryAfter seconds: Int) -> HTTP1Response {
        .json(
            503, #"{"error":"overloaded","detail":"too many connections; nothing was processed"}"#,
            headers: [HTTP1Headers.Field(name: "retry-after", value: String(max(1, seconds)))])
    }

    /// The bytes of this answer on the wire: status line, fields, `content-length`, `connection` when it matters,
    /// the empty line, and the body unless `headRequest`. `close` adds `connection: close`; `keepAliveHTTP10` adds
    /// `connection: keep-alive` (an HTTP/1.0 client closes unless told otherwise).
    public func serialized(close: Bool, keepAliveHTTP10: Bool = false, headRequest: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + body.count + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
        Self.append("HTTP/1.1 ", to: &out)
        let code = (100...999).contains(status) ? status : 500
        Self.appendDecimal(code, to: &out)
        out.append(ASCII.space)
        out.append(contentsOf: Self.reasonPhrase(code).utf8)
        Self.append("\r\n", to: &out)
        for index in headers.indices where Self.isSendable(headers[index]) {
            Self.withBytes(of: headers[index].name) { out.append(contentsOf: $0) }
            Self.append(": ", to: &out)
            Self.withBytes(of: headers[index].value) { out.append(contentsOf: $0) }
            Self.append("\r\n", to: &out)
        }
        Self.append("content-length: ", to: &out)
        Self.appendDecimal(body.count, to: &out)
        Self.append("\r\n", to: &out)
        if close {
            Self.append("connection: close\r\n", to: &out)
        } else if keepAliveHTTP10 {
            Self.append("connection: keep-alive\r\n", to: &out)
        }
        Self.append("\r\n", to: &out)
        if !headRequest {
            out.append(contentsOf: body)
        }
        return out
    }

    private static func isSendable(_ field: HTTP1Headers.Field) -> Bool {
        guard !field.name.isEmpty, withBytes(of: field.name, { $0.allSatisfy(ASCII.isToken) }) else { return false }
        for framing in ["content-length", "transfer-encoding", "connection"]
        where HTTP1Headers.namesMatch(field.name, framing) {
            return false
        }
        return withBytes(of: field.value) { $0.allSatisfy(ASCII.isFieldValue) }
    }

    /// Runs `body` on `text`'s UTF-8 in its own storage (a native string's; a copy for any other): iterating or
    /// appending a string's `utf8` view goes byte by byte through its index, several times the instructions.
    private static func withBytes<Result>(of text: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// Appends a literal's bytes (appending a string's `utf8` view goes through its index, even for a literal).
    private static func append(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `value` (not negative) in decimal, without making a string of it.
    private static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        precondition(value >= 0)
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var rest = value
        repeat {
            out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        } while divisor > 0
    }

    /// The reason phrase of the statuses the relay answers (the phrase is informative only: RFC 9112, 4).
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }
}
