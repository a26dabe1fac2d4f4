import Synchronization

/// A head decision that arrives after ``HTTPHandler/head(_:)`` has returned (for example once a
/// shared rate limiter has answered): return `.later(pending)` from `head`, then call
/// ``decide(_:)`` exactly once. The server resumes the request then; a decision that comes before
/// the server has suspended it is taken at once, without suspending.
///
/// Ownership: while the request waits, this object holds its ``RequestContext`` (released when
/// decided or when the request closes); the context holds this object until it has taken the decision.
public final class PendingHeadDecision: Sendable {
    private enum State {
        case open
        case decided(HeadDecision)
        /// The server has suspended the request and waits for the decision.
        case waiting(RequestContext)
        /// The request has gone (closed, or the server stopped): a decision is dropped.
        case abandoned
    }

    private let state = Mutex(State.open)

    public init() {}

    /// Delivers the decision (`.respond` or `.readBody`; `.later` is treated as an internal error:
    /// 500). Later calls are ignored.
    public func decide(_ decision: HeadDecision) {
        var decision = decision
        if case .later = decision { decision = .respond(HTTPResponse(status: 500)) }
        let waiting: RequestContext? = state.withLock { state in
            switch state {
            case .open:
                state = .decided(decision)
                return nil
            case .waiting(let context):
                state = .decided(decision)
                return context
            case .decided, .abandoned:
                return nil
            }
        }
        waiting?.resumeForStop()
    }

    /// The server side: the decision if it has come; else `suspend()` (which may refuse: the
    /// server is stopping) and, if it did, registers `context` to be resumed by the decision.
    /// `suspend` runs under this object's lock, so a decision never comes between the check and the suspension.
    func take(orWaitWith context: RequestContext, suspend: () -> Bool) -> HeadDecision? {
        state.withLock { state in
            switch state {
            case .decided(let decision):
                state = .abandoned
                return decision
            case .open:
                state = suspend() ? .waiting(context) : .abandoned
                return nil
            case .waiting, .abandoned:
                return nil
            }
        }
    }

    /// The decision after a resume (nil: resumed without one, because the server is stopping).
    func taken() -> HeadDecision? {
        state.withLock { state in
            guard case .decided(let decision) = state else { return nil }
            state = .abandoned
            return decision
        }
    }

    /// The request closed without using a decision: let go of its context.
    func abandon() {
        state.withLock { $0 = .abandoned }
    }
}
