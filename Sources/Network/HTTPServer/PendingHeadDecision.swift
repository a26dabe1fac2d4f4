import HTTP1
import Synchronization

/// A head decision that arrives after ``HTTPHandler/head(_:)`` has returned (for example once a
/// shared rate limiter has answered): return `.later(pending)` from `head`, then call
/// ``decide(_:)`` exactly once, from any thread. The request waits for it (nothing else is read or
/// answered for its connection); a decision that comes before the server has started waiting is
/// taken at once.
///
/// Ownership: while the request waits, this object holds a weak reference to its connection; the
/// connection holds this object until the decision comes or the connection closes.
public final class PendingHeadDecision: Sendable {
    private enum State {
        case open
        case decided(HeadDecision)
        /// The server waits for the decision.
        case waiting(ConnectionReference)
        /// Taken, or the request has gone: a decision is dropped.
        case abandoned
    }

    private let state = Mutex(State.open)

    public init() {}

    /// Delivers the decision (`.respond` or `.readBody`; `.later` is treated as an internal error:
    /// 500). Later calls are ignored.
    public func decide(_ decision: HeadDecision) {
        let waiting: ConnectionReference? = state.withLock { state in
            switch state {
            case .open:
                state = .decided(decision)
                return nil
            case .waiting(let reference):
                state = .abandoned
                return reference
            case .decided, .abandoned:
                return nil
            }
        }
        guard let waiting else { return }
        waiting.withConnection { [self] connection in connection.decided(decision, by: self) }
    }

    /// The server side, on the connection's loop: the decision if it has come; else the connection waits for it.
    func take(orWaitWith reference: ConnectionReference) -> HeadDecision? {
        state.withLock { state in
            switch state {
            case .decided(let decision):
                state = .abandoned
                return decision
            case .open:
                state = .waiting(reference)
                return nil
            case .waiting, .abandoned:
                return nil
            }
        }
    }

    /// The request closed without using a decision: let go of its connection.
    func abandon() {
        state.withLock { $0 = .abandoned }
    }
}
