/// What a handler wants once it has seen a request's headers.
public enum HeadDecision: Sendable {
    /// Answer now, without reading any body (the connection closes if a body was announced).
    case respond(HTTPResponse)
    /// Read the body, up to `limit` bytes, then call ``HTTPHandler/request(_:body:responder:)``.
    case readBody(limit: Int)
}
