import HTTP1

/// What a handler wants once it has seen a request's headers.
public enum HeadDecision: Sendable {
    /// Answer now, without reading any body (the connection closes if a body was announced).
    case respond(HTTP1Response)
    /// Read the body, up to `limit` bytes, then call ``HTTPHandler/request(_:body:responder:)``.
    case readBody(limit: Int)
    /// Decide later: the request waits, its connection suspended (holding no server thread), until
    /// the handler calls ``PendingHeadDecision/decide(_:)`` with `.respond` or `.readBody`, from any thread.
    case later(PendingHeadDecision)
}

extension HeadDecision {
    /// The decision as the connection's conversation takes it (a pending one is awaited).
    var plain: HTTP1Conversation.Decision {
        switch self {
        case .respond(let response): .respond(response)
        case .readBody(let limit): .readBody(limit: limit)
        case .later: .later
        }
    }
}
