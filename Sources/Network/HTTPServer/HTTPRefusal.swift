import HTTP1

/// Why the server refused a request from its framing or its size, before the handler saw it whole (docs/DESIGN.md, "The
/// HTTP front"). The connection closes once the answer is written.
public struct HTTPRefusal: Sendable, Equatable {
    /// The answer's status: 400, 414, 431, 501 or 505 (a body over its limit goes to
    /// ``HTTPHandler/bodyTooLarge(_:)`` instead).
    public let status: Int
    /// The relay's JSON error code for it: `bad_request`, `too_large`, `not_implemented` or `version_not_supported`.
    public let error: String
    /// One short English sentence naming the rule broken; it never quotes the request.
    public let reason: String
    /// The rule broken, for a handler that words its own answer (nil for a refusal made here from the status alone).
    public let rule: HTTP1ParseError.Code?
    /// Whether the handler's ``HTTPHandler/head(_:)`` already had this request (a refusal of its chunked body or its
    /// trailers): a handler that counted the request there must not count it again.
    public let followsHead: Bool

    /// Creates a refusal.
    public init(
        status: Int, error: String, reason: String, rule: HTTP1ParseError.Code? = nil, followsHead: Bool = false
    ) {
        self.status = status
        self.error = error
        self.reason = reason
        self.rule = rule
        self.followsHead = followsHead
    }

    init(_ parseError: HTTP1ParseError, followsHead: Bool) {
        self.init(
            status: parseError.status, error: parseError.code.errorName, reason: parseError.reason,
            rule: parseError.code, followsHead: followsHead)
    }

    /// The plain answer: `{"error":"<error>"}`.
    public var response: HTTP1Response {
        .json(status, #"{"error":""# + error + #""}"#)
    }
}
