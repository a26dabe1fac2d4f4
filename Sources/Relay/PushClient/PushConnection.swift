import Dispatch
import EventLoops
import OutboundConnections
import Synchronization
import TLS

/// The shell of ``PushExchange``: one connection to the relay on an event loop of its own (OutboundConnections'
/// ``ClientStream``, with the OpenSSL client context the relay trusts APNs and Redis with), one request
/// written once it is open, the answer read, all within one deadline.
///
/// Loop-bound but for ``exchange(host:port:transport:request:timeoutMilliseconds:)``, which blocks its caller. No
/// instance leaves this module (the delegate methods are public because ``ClientStreamDelegate`` is).
public final class PushConnection: ClientStreamDelegate {
    private let loop: EventLoop
    private let request: [UInt8]
    private var machine = PushExchange()
    private var stream: ClientStream?
    private var deadline: LoopTimer?
    private let finished: @Sendable (PushExchange.Result) -> Void

    private init(loop: EventLoop, request: [UInt8], finished: @escaping @Sendable (PushExchange.Result) -> Void) {
        self.loop = loop
        self.request = request
        self.finished = finished
    }

    /// Connects to `host`:`port` (with TLS, verifying the server as `transport` says), writes `request` and
    /// reads the answer; returns how the exchange ended. Blocks the calling thread (never a loop's).
    public static func exchange(
        host: String, port: UInt16, transport: PushTransport, request: [UInt8], timeoutMilliseconds: UInt64
    ) throws(LoopError) -> PushExchange.Result {
        let loop = try EventLoop(name: "duo-push", readBufferSize: 16 * 1024) { OpenSSLThread.stop() }
        let result = Mutex<PushExchange.Result?>(nil)
        let done = DispatchSemaphore(value: 0)
        let accepted = loop.execute {
            let connection = PushConnection(loop: loop, request: request) { outcome in
                result.withLock { $0 = outcome }
                done.signal()
            }
            connection.start(host: host, port: port, tls: transport.tls, timeoutMilliseconds: timeoutMilliseconds)
        }
        if accepted { done.wait() }
        // Closes the stream and the timer if they are still open.
        loop.stop()
        return result.withLock { $0 } ?? .failed(.timedOutConnecting)
    }

    private func start(host: String, port: UInt16, tls: ClientStream.TLS?, timeoutMilliseconds: UInt64) {
        let timer = LoopTimer(on: loop) { [self] in
            guard let result = machine.deadlinePassed() else { return }
            end(result)
        }
        timer.schedule(afterMilliseconds: timeoutMilliseconds)
        deadline = timer
        stream = ClientStream.connect(on: loop, host: host, port: port, tls: tls, delegate: self)
    }

    private func end(_ result: PushExchange.Result) {
        deadline?.close()
        deadline = nil
        stream?.reset()
        stream = nil
        finished(result)
    }

    public func streamDidConnect(_ stream: ClientStream) {
        machine.connected()
        stream.write(request)
    }

    public func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        guard let result = machine.read(bytes) else { return }
        end(result)
    }

    public func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        // Compared, not switched over: a kind added to ClientStreamFailure is a lost connection here.
        let kind = failure.kind
        let reported: PushExchange.ConnectionFailure =
            if kind == .resolve {
                .resolve(failure.reason)
            } else if kind == .connect {
                .connect(failure.reason)
            } else if kind == .certificate {
                .certificate(failure.reason)
            } else if kind == .handshake {
                .handshake(failure.reason)
            } else if kind == .closedByPeer {
                .closedByPeer
            } else {
                .lost(failure.reason)
            }
        guard let result = machine.failed(reported) else { return }
        end(result)
    }
}
