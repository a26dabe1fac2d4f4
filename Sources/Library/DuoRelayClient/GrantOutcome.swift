import Foundation

/// What became of a grant request (docs/API.md, "POST /v1/grant").
public enum GrantOutcome: Sendable, Equatable {
    /// The grant, and when the relay stops accepting it.
    case granted(grant: String, expiresAt: Date)
    /// The relay has no APNs key for that environment.
    case environmentUnavailable
    /// Try again after the wait (when given).
    case retry(after: Duration?, reason: RetryReason)
    /// No answer (connection or timeout) or a server error: minting has no effect but the grant,
    /// so it is always safe to ask again.
    case failed
    /// The request is wrong (token or environment): the relay's detail, for logs.
    case rejected(String)

    /// Reads an answer of `POST /v1/grant`.
    public init(_ answer: RelayAnswer) {
        switch answer.status {
        case 200:
            guard let grant = answer.strings["grant"], let text = answer.strings["expires_at"],
                let expiresAt = ISO8601DateFormatter().date(from: text)
            else {
                self = .failed
                return
            }
            self = .granted(grant: grant, expiresAt: expiresAt)
        case 400 where answer.error == "environment_unavailable": self = .environmentUnavailable
        case 429, 503: self = .retry(after: answer.retryAfter, reason: answer.retryReason)
        case 500..<600: self = .failed
        default: self = .rejected(answer.rejection)
        }
    }
}
