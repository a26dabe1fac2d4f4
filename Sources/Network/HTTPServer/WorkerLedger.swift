import Synchronization

/// One worker's record of the requests it holds, the one place where work in flight is counted: the server adds the
/// workers' records up when asked (``HTTPServer/pendingResponses``, and the leak checks of tests).
///
/// Each worker has its own, so that a request's counts are written by the core that runs it, never on a line another
/// worker writes. A request context retains its worker's record (not the server's core): a handler may answer from any
/// thread, even after the server has stopped.
final class WorkerLedger: Sendable {
    /// Requests handed to ``HTTPHandler/request(_:body:responder:)`` and not answered yet (nor dropped with their
    /// connection).
    let pending = Atomic<Int>(0)
    /// Request contexts the worker's connections hold right now: from the hand-over until the answer reaches the
    /// connection, or the connection closes (for leak checks in tests).
    let held = Atomic<Int>(0)
    /// ``RequestContext`` objects alive: held by a connection or by a responder (for leak checks in tests: zero once
    /// the server has stopped and the handler has let go of its responders).
    let alive = Atomic<Int>(0)
    /// Keeps the records of two workers, made one after the other, off each other's cache lines.
    private let padding: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    )
}

extension [WorkerLedger] {
    /// The workers' records added up, for one count (`count` reads it from a record).
    func total(_ count: (WorkerLedger) -> Int) -> Int {
        reduce(0) { $0 + count($1) }
    }
}
