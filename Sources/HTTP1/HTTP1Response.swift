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

    /// The bytes of this answer on the wire: status line, fields, `content-length`, `connection` when it matters,
    /// the empty line, and the body unless `headRequest`. `close` adds `connection: close`; `keepAliveHTTP10` adds
    /// `connection: keep-alive` (an HTTP/1.0 client closes unless told otherwise).
    public func serialized(close: Bool, keepAliveHTTP10: Bool = false, headRequest: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + body.count + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        let code = (100...999).contains(status) ? status : 500
        out.append(contentsOf: String(code).utf8)
        out.append(ASCII.space)
        out.append(contentsOf: Self.reasonPhrase(code).utf8)
        out.append(contentsOf: "\r\n".utf8)
        for field in headers where Self.isSendable(field) {
            out.append(contentsOf: field.name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: field.value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        out.append(contentsOf: "content-length: ".utf8)
        out.append(contentsOf: String(body.count).utf8)
        out.append(contentsOf: "\r\n".utf8)
        if close {
            out.append(contentsOf: "connection: close\r\n".utf8)
        } else if keepAliveHTTP10 {
            out.append(contentsOf: "connection: keep-alive\r\n".utf8)
        }
        out.append(contentsOf: "\r\n".utf8)
        if !headRequest {
            out.append(contentsOf: body)
        }
        return out
    }

    private static func isSendable(_ field: HTTP1Headers.Field) -> Bool {
        guard !field.name.isEmpty, field.name.utf8.allSatisfy(ASCII.isToken) else { return false }
        for framing in ["content-length", "transfer-encoding", "connection"]
        where HTTP1Headers.namesMatch(field.name, framing) {
            return false
        }
        return field.value.utf8.allSatisfy(ASCII.isFieldValue)
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
