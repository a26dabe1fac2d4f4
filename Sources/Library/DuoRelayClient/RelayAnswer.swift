import Foundation

/// What the relay answered, read from the status, `Retry-After` and the JSON body: the
/// transport-free part of the client, so that any HTTP library can be used with the outcomes.
public struct RelayAnswer: Sendable, Equatable {
    public var status: Int
    /// `error` of an error body (`bad_request`, `grant_expired`, ...).
    public var error: String?
    /// `detail`: for people and logs; decide by `error` and `limit`, never by it.
    public var detail: String?
    /// `limit` of a 429: `phone`, `address` or `apns`.
    public var limit: String?
    /// The wait `Retry-After` asks for.
    public var retryAfter: Duration?
    /// The JSON body's members that are strings (`apns_id`, `grant`, `expires_at`).
    public var strings: [String: String]

    public init(status: Int, retryAfter: String?, body: Data, now: Date = Date()) {
        self.status = status
        self.retryAfter = RetryAfter.parse(retryAfter, now: now)
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        strings = object.compactMapValues { $0 as? String }
        error = strings["error"]
        detail = strings["detail"]
        limit = strings["limit"]
    }

    /// A short text for `.rejected`: the detail, or what is known without one.
    var rejection: String {
        detail ?? error.map { "\($0) (HTTP \(status))" } ?? "HTTP \(status)"
    }

    /// The reason of a 429 or 503.
    var retryReason: RetryReason {
        status == 503 ? .overloaded : limit.map(RetryReason.init(rawValue:)) ?? .phoneLimit
    }
}
