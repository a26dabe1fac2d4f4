import HTTPServer
import RelayCore

extension RelayError {
    /// The one place an error becomes an HTTP answer, on either listener: the status and body from the
    /// error's table, `Retry-After` when it has one, and `Allow` (the methods listed) on a 405.
    func response(allow: String) -> HTTPResponse {
        var headers: [(name: String, value: String)] = []
        if let retryAfter { headers.append(("retry-after", String(retryAfter))) }
        // RFC 9110, 15.5.6: a 405 lists the methods the resource takes.
        if code == .methodNotAllowed { headers.append(("allow", allow)) }
        return HTTPResponse.json(status, body, headers: headers)
    }
}
