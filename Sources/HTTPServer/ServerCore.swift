import Synchronization

/// The state shared by the daemon's callbacks, the request contexts and the ``HTTPServer`` object.
///
/// The daemon's callbacks reach it through an unretained pointer: ``HTTPServer`` keeps it alive and stops the
/// daemon before letting go. Request contexts hold it unowned (see ``RequestContext/core``): a context can outlive
/// the server in a responder the handler kept, and must not keep the server, and so the handler, alive with it.
final class ServerCore: Sendable {
    let handler: any HTTPHandler
    let maxHeaderBytes: Int
    let maxURLBytes: Int
    /// Counters that request contexts update, retained by each of them.
    let counters = RequestCounters()
    /// Request contexts MHD currently holds (for leak checks in tests).
    let openContexts = Atomic<Int>(0)
    /// Set by ``HTTPServer/quiesce()``: every later answer closes its connection.
    let quiesced = Atomic<Bool>(false)
    /// Suspended requests, so that ``HTTPServer/stop()`` can resume them (MHD must not stop with any suspended).
    /// A context leaves it when its request is resumed or closed, or when the server stops.
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
