import HTTP1
import HTTPServer
import RelayCore

extension RelayError {
    /// The one place an error becomes an HTTP answer, on either listener: the status and body from the
    /// error's table, `Retry-After` when it has one, and `Allow` (the methods listed) on a 405.
    func response(allow: String) -> HTTP1Response {
        var headers: [HTTP1Headers.Field] = []
        if let retryAfter { headers.append(HTTP1Headers.Field(name: "retry-after", value: String(retryAfter))) }
        // RFC 9110, 15.5.6: a 405 lists the methods the resource takes.
        if code == .methodNotAllowed { headers.append(HTTP1Headers.Field(name: "allow", value: allow)) }
        return HTTP1Response.json(status, body, headers: headers)
    }
}

extension RelayError {
    /// The relay's answer to a request its HTTP front refused (docs/DESIGN.md, "The HTTP front"): the error code for
    /// the status, with a detail naming the rule broken (never a value from the request).
    static func refusal(_ rule: HTTP1ParseError.Code?, status: Int) -> RelayError {
        switch status {
        case 413, 414, 431: return .tooLarge
        case 501:
            return RelayError(
                .notImplemented, detail: "Transfer-Encoding: the only transfer coding accepted is chunked")
        case 505: return RelayError(.versionNotSupported, detail: "request line: only HTTP/1.0 and HTTP/1.1 are served")
        default: break
        }
        let detail: StaticString
        switch rule {
        case .invalidRequestLine?: detail = "request line: must be METHOD SP target SP HTTP/1.x, with single spaces"
        case .invalidMethod?: detail = "request line: the method must be a token"
        case .invalidTarget?:
            detail = "request line: the target must be a path or an absolute http URL, without spaces or control bytes"
        case .invalidLineEnding?: detail = "framing: every line must end in CRLF"
        case .invalidFieldName?: detail = "header: a field name must be a token followed at once by a colon"
        case .obsoleteLineFolding?: detail = "header: obsolete line folding is not accepted"
        case .invalidFieldValue?: detail = "header: a field value must hold no control byte but tab"
        case .invalidHost?: detail = "Host: an HTTP/1.1 request needs exactly one valid Host line"
        case .invalidContentLength?: detail = "Content-Length: must be ASCII digits, given once"
        case .invalidTransferEncoding?:
            detail = "Transfer-Encoding: only one chunked, in HTTP/1.1, and never with Content-Length"
        case .invalidChunkSize?: detail = "framing: a chunk size must be hex digits"
        case .invalidChunkData?: detail = "framing: chunk data must end in CRLF"
        default: detail = "framing: the request breaks RFC 9112"
        }
        return RelayError.badRequest.detail(detail)
    }
}
