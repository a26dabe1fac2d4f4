/// How ``RelayClient/push(_:grant:retrying:)`` retries: only what is safe to send again.
///
/// Safe: `.retry` (the relay or APNs refused the push before it reached the phone) and
/// `.failed(mayHaveBeenDelivered: false)` (it never reached the relay). `.failed(mayHaveBeenDelivered:
/// true)` is resent too unless ``resendMaybeDelivered`` is false: the push carries the same `id`,
/// which APNs uses as the collapse id, so a second delivery replaces the first on the phone instead
/// of adding one. Never retried: `.delivered`, `.dropRegistration`, `.renewGrant` and `.rejected`,
/// which no resend can change.
public struct RetryPolicy: Sendable, Equatable {
    /// Sends in all, the first included.
    public var maxAttempts: Int
    /// The longest wait it accepts; a longer `Retry-After` (a phone's limit: up to a minute) ends
    /// the retries with that `.retry` outcome, for the caller to schedule.
    public var maxWait: Duration
    /// The wait before the first resend when the relay gave no `Retry-After`; it doubles each time.
    public var backoff: Duration
    /// Whether a push that may have been delivered is resent (see above).
    public var resendMaybeDelivered: Bool

    public init(
        maxAttempts: Int = 3, maxWait: Duration = .seconds(10), backoff: Duration = .seconds(1),
        resendMaybeDelivered: Bool = true
    ) {
        self.maxAttempts = maxAttempts
        self.maxWait = maxWait
        self.backoff = backoff
        self.resendMaybeDelivered = resendMaybeDelivered
    }

    /// How long to wait before sending again after `outcome` (the `attempt`th send, from 1), or
    /// nil when it must not be sent again.
    public func wait(after outcome: PushOutcome, attempt: Int) -> Duration? {
        guard attempt < maxAttempts else { return nil }
        let doubled = backoff * (1 << min(attempt - 1, 20))
        let wait: Duration
        switch outcome {
        case .retry(let after, _): wait = after ?? doubled
        case .failed(let maybe) where !maybe || resendMaybeDelivered: wait = doubled
        default: return nil
        }
        return wait <= maxWait ? wait : nil
    }
}
