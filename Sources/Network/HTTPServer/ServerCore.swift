import Dispatch
import HTTP1
import Synchronization

/// What every worker of one ``HTTPServer`` shares: the handler, the connection machine's settings, the caps and the
/// workers' records of work in flight. Workers and connections hold it; request contexts do not (see
/// ``RequestContext``), so that a responder a handler keeps never keeps the server, and the handler with it, alive.
final class ServerCore: Sendable {
    let handler: any HTTPHandler
    let connection: HTTP1Connection.Configuration
    let caps: ConnectionCaps
    /// The TLS every connection runs through; nil: plain HTTP.
    let tls: TLSFront?
    /// Each worker's record of the requests it holds (indexed by ``ServerWorker/index``), added up by the server's
    /// counts; a request context retains its own worker's, so an answer that comes after the server stopped still
    /// counts.
    let ledgers: [WorkerLedger]
    /// Set by ``HTTPServer/quiesce()``: every later answer closes its connection.
    let quiesced = Atomic<Bool>(false)
    /// Signalled when the last connection of a quiesced server closes (``HTTPServer/waitUntilDrained(until:)``).
    let drained = DispatchSemaphore(value: 0)

    /// Each worker's way to try its connections waiting for room again, on its own loop (set as the workers start).
    let roomWakers = Mutex<[@Sendable () -> Void]>([])
    /// Each worker's way to run work once its loop has read what was ready when asked, by worker index (set as the
    /// workers start): work it cannot take (its loop has stopped) it runs at once. A connection over a cap waits for
    /// the other workers' turns before it is refused (``ServerWorker/afterOtherWorkersTurn(within:_:)``).
    let turnTakers = Mutex<[Int: @Sendable (@escaping @Sendable () -> Void) -> Void]>([:])

    /// A connection counted against the caps has closed (the server has closed it, or its handle closed without).
    func connectionClosed(_ peer: SocketPeer) {
        let (open, wake) = caps.release(peer)
        if open == 0 && quiesced.load(ordering: .relaxed) {
            drained.signal()
        }
        if wake {
            for wake in roomWakers.withLock({ $0 }) { wake() }
        }
    }

    init(
        handler: any HTTPHandler, connection: HTTP1Connection.Configuration, caps: ConnectionCaps, workers: Int,
        tls: TLSFront? = nil
    ) {
        ledgers = (0..<workers).map { _ in WorkerLedger() }
        self.tls = tls
        self.handler = handler
        self.connection = connection
        self.caps = caps
    }
}
