import EventLoops
import HTTP1
import Synchronization

/// A weak reference to a connection that may cross threads: the connection is loop-bound, so `connection` is read and
/// cleared only on `loop`'s thread.
// @unchecked Sendable: `connection` is touched only on `loop`'s thread (every use checks `loop.isCurrent` or runs
// in work handed to `loop.execute`); `loop` never changes.
final class ConnectionReference: @unchecked Sendable {
    let loop: EventLoop
    weak var connection: ServerConnection?

    init(loop: EventLoop, connection: ServerConnection) {
        self.loop = loop
        self.connection = connection
    }

    /// Runs `work` with the connection on its loop: at once when called there, else handed to the loop (dropped if
    /// the connection has gone or the loop has stopped).
    func withConnection(_ work: @escaping @Sendable (ServerConnection) -> Void) {
        if loop.isCurrent {
            if let connection { work(connection) }
        } else {
            loop.execute { [self] in
                if let connection { work(connection) }
            }
        }
    }
}

/// One request handed to ``HTTPHandler/request(_:body:responder:)``, from then until it is answered or dropped with
/// its connection.
///
/// Ownership: the connection holds it until the answer comes or the connection closes, and every ``HTTPResponder``
/// holds it, so an answer that comes after the client left is simply dropped. It holds its connection weakly and its
/// worker's ledger strongly, never the server: a responder the handler keeps does not keep the server alive.
final class RequestContext: Sendable {
    let ledger: WorkerLedger
    let reference: ConnectionReference
    /// The request's route (``HTTPRequestHead/route``), for an answer the server gives in the handler's stead
    /// (``HTTPServer/answerWaiting(_:)``).
    let route: Int
    /// 0: waiting for the answer; 1: answered; 2: dropped unanswered.
    private let state = Atomic<UInt8>(0)

    init(ledger: WorkerLedger, reference: ConnectionReference, route: Int) {
        self.ledger = ledger
        self.reference = reference
        self.route = route
        ledger.alive.add(1, ordering: .relaxed)
        ledger.pending.add(1, ordering: .relaxed)
    }

    deinit {
        ledger.alive.subtract(1, ordering: .relaxed)
    }

    /// The handler's answer, from any thread; only the first counts.
    func deliver(_ response: HTTP1Response) {
        guard state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged else { return }
        ledger.pending.subtract(1, ordering: .relaxed)
        reference.withConnection { [self] connection in connection.answer(response, for: self) }
    }

    /// The connection let go of the request before its answer (the client left, or the server stopped).
    func drop() {
        if state.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged {
            ledger.pending.subtract(1, ordering: .relaxed)
        }
    }
}
