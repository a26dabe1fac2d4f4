/// What became of a push, as a channel acts on it (docs/API.md, "POST /v1/push").
public enum PushOutcome: Sendable, Equatable {
    /// APNs accepted the notification (its `apns-id`, when the relay passed one on).
    case delivered(apnsID: String?)
    /// This grant can never deliver (APNs: unregistered or bad token): forget the registration.
    case dropRegistration
    /// The grant no longer opens: ask the phone for a new one. `expired`: its lifetime passed
    /// (otherwise it is invalid, for example minted under a retired relay key).
    case renewGrant(expired: Bool)
    /// Not sent to the phone; the same push may be sent again after the wait (when given).
    case retry(after: Duration?, reason: RetryReason)
    /// No definite answer. `mayHaveBeenDelivered`: APNs may have shown it (a relay 502, a timeout,
    /// a connection lost); resending with the same `id` then replaces rather than duplicates.
    case failed(mayHaveBeenDelivered: Bool)
    /// The request itself is wrong (400, 404, 405, 413): resending it unchanged cannot help. The
    /// text is the relay's detail, for logs.
    case rejected(String)

    /// Reads an answer of `POST /v1/push`.
    public init(_ answer: RelayAnswer) {
        switch answer.status {
        case 200..<300: self = .delivered(apnsID: answer.strings["apns_id"])
        case 410: self = .dropRegistration
        case 401: self = .renewGrant(expired: answer.error == "grant_expired")
        case 429, 503: self = .retry(after: answer.retryAfter, reason: answer.retryReason)
        // 502 is the relay's "APNs may or may not have it"; other 5xx come from something in
        // front of the relay, which may have passed the push on before failing.
        case 500..<600: self = .failed(mayHaveBeenDelivered: true)
        default: self = .rejected(answer.rejection)
        }
    }
}
