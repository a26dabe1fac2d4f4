import Synchronization

/// Counts that a request context updates from any thread, even after its server has stopped (a responder the handler
/// kept can answer late). Each ``RequestContext`` retains this object, while it holds its ``ServerCore`` unowned.
final class RequestCounters: Sendable {
    /// Requests handed to ``HTTPHandler/request(_:body:responder:)`` and not answered yet.
    let pending = Atomic<Int>(0)
    /// ``RequestContext`` objects alive: held by MHD, by a responder or by the suspended registry (for leak checks
    /// in tests: zero once the server has stopped and the handler has let go of its responders).
    let liveContexts = Atomic<Int>(0)
}
