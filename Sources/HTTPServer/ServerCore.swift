import Synchronization

/// The state shared by the daemon's callbacks, the request contexts and the ``HTTPServer`` object.
///
/// The daemon's callbacks reach it through an unretained pointer: ``HTTPServer`` keeps it alive and stops the
/// daemon before letting go. Request contexts retain it, so a late answer never touches freed memory.
final class ServerCore: Sendable {
    let handler: any HTTPHandler
    let maxHeaderBytes: Int
    let maxURLBytes: Int
    /// Requests handed to ``HTTPHandler/request(_:body:responder:)`` and not answered yet.
    let pending = Atomic<Int>(0)
    /// Request contexts MHD currently holds (for leak checks in tests).
    let openContexts = Atomic<Int>(0)
    /// Set by ``HTTPServer/quiesce()``: every later answer closes its connection.
    let quiesced = Atomic<Bool>(false)
    /// Suspended requests, so that ``HTTPServer/stop()`` can resume them (MHD must not stop with any suspended).
    let suspended = Mutex(SuspendedRequests())

    struct SuspendedRequests {
        var stopping = false
        var contexts: [ObjectIdentifier: RequestContext] = [:]
    }

    init(handler: any HTTPHandler, maxHeaderBytes: Int, maxURLBytes: Int) {
        self.handler = handler
        self.maxHeaderBytes = maxHeaderBytes
        self.maxURLBytes = maxURLBytes
    }

    /// The answer to a request whose headers or target are over the limits.
    static func tooLarge(_ status: Int) -> HTTPResponse {
        .json(status, #"{"error":"too_large"}"#)
    }
}
