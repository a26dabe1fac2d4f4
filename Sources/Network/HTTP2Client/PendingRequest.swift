import MonotonicTime

/// A request accepted by `send` and not yet completed, with its deadline, its completion and
/// its history of tries. A reference: it is handed from the pool's queue to a connection's stream and
/// back, and copying a struct of this size retained every string, array and closure in it each time.
final class PendingRequest: Sendable {
    typealias Completion = @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void

    let request: HTTP2Request
    /// On the loop's clock (`EventLoop.monotonicNow()`): the answer must have arrived by then.
    let deadline: Instant
    let completion: Completion
    /// Times its HEADERS were written on earlier tries.
    let sends: Int
    /// Connections it was given to on earlier tries.
    let tries: Int
    /// Earlier tries that failed because the connection could not be made.
    let connectFailures: Int
    /// Refused by a GOAWAY before: it goes only to connections opened for suspects.
    let suspect: Bool
    /// It was alone on its connection when a GOAWAY refused it.
    let drewGoawayAlone: Bool

    init(
        request: HTTP2Request, deadline: Instant, completion: @escaping Completion, sends: Int = 0,
        tries: Int = 0, connectFailures: Int = 0, suspect: Bool = false, drewGoawayAlone: Bool = false
    ) {
        self.request = request
        self.deadline = deadline
        self.completion = completion
        self.sends = sends
        self.tries = tries
        self.connectFailures = connectFailures
        self.suspect = suspect
        self.drewGoawayAlone = drewGoawayAlone
    }

    /// The same request for another try.
    func retried(
        sends: Int, tries: Int, suspect: Bool? = nil, drewGoawayAlone: Bool? = nil, connectFailed: Bool = false
    ) -> PendingRequest {
        PendingRequest(
            request: request, deadline: deadline, completion: completion, sends: sends, tries: tries,
            connectFailures: connectFailures + (connectFailed ? 1 : 0), suspect: suspect ?? self.suspect,
            drewGoawayAlone: drewGoawayAlone ?? self.drewGoawayAlone)
    }
}
