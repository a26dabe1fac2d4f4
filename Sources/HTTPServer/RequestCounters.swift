import Synchronization

/// Counts that a request context updates from any thread, even after its server has stopped (a responder the handler
/// kept can answer late). Each ``RequestContext`` retains this object, never the server's core.
final class RequestCounters: Sendable {
    /// Requests handed to ``HTTPHandler/request(_:body:responder:)`` and not answered yet (nor dropped with their
    /// connection).
    let pending = Atomic<Int>(0)
    /// ``RequestContext`` objects alive: held by a connection or by a responder (for leak checks in tests: zero once
    /// the server has stopped and the handler has let go of its responders).
    let liveContexts = Atomic<Int>(0)
}
