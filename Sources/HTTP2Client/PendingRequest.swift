/// A request accepted by `send` and not yet completed, with its deadline and its completion.
/// A reference: it is handed from queue to inbox to transfer and back, and copying a struct of
/// this size retained every string, array and closure in it each time.
final class PendingRequest: Sendable {
    typealias Completion = @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void

    let request: HTTP2Request
    let deadline: ContinuousClock.Instant
    let completion: Completion
    /// 0 for the first try, 1 for the one retry a request may get.
    let attempt: Int

    init(request: HTTP2Request, deadline: ContinuousClock.Instant, completion: @escaping Completion, attempt: Int = 0) {
        self.request = request
        self.deadline = deadline
        self.completion = completion
        self.attempt = attempt
    }

    /// The same request for its retry.
    func retried() -> PendingRequest {
        PendingRequest(request: request, deadline: deadline, completion: completion, attempt: attempt + 1)
    }
}
