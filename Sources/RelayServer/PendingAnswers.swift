import HTTPServer
import Synchronization

/// Pushes waiting for APNs, so that a stopping relay can answer whichever of them the grace
/// period did not see through. Each is answered exactly once: by its outcome or by shutdown.
final class PendingAnswers: Sendable {
    private struct State {
        var next: UInt64 = 0
        var waiting: [UInt64: HTTPResponder] = [:]
    }

    private let state = Mutex(State())

    /// Registers a responder; the ticket claims it later.
    func add(_ responder: HTTPResponder) -> UInt64 {
        state.withLock { state in
            state.next += 1
            state.waiting[state.next] = responder
            return state.next
        }
    }

    /// Claims a ticket: true if it was still waiting (and so must be answered by the caller).
    func claim(_ ticket: UInt64) -> Bool {
        state.withLock { $0.waiting.removeValue(forKey: ticket) != nil }
    }

    var count: Int { state.withLock { $0.waiting.count } }

    /// Claims every waiting responder.
    func claimAll() -> [HTTPResponder] {
        state.withLock { state in
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
    }
}
