/// A request accepted by `send` and not yet completed, with its deadline and its completion.
struct PendingRequest: Sendable {
    typealias Completion = @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void

    let request: HTTP2Request
    let deadline: ContinuousClock.Instant
    let completion: Completion
    /// 0 for the first try, 1 for the one retry a request may get.
    var attempt: Int = 0
}
