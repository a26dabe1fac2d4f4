import Loop
import LoopTLS
import TLS

/// The shell around ``SentinelMachine`` on a pipeline's loop: one connection to a sentinel at a time (asking, then
/// kept as the `+switch-master` watch), its reply reader and one timer. It tells its pipeline where the primary is
/// (``Handler/primary``), that no sentinel named it (``Handler/exhausted``), or that it moved (``Handler/moved``).
///
/// Loop-bound: made, used and closed on the pipeline's loop only.
final class SentinelLocator {
    struct Handler {
        var primary: (SentinelMachine.Node) -> Void
        var exhausted: (RedisClientError) -> Void
        var moved: (SentinelMachine.Node) -> Void
    }

    private let loop: EventLoop
    private let context: TLSClientContext?
    private var machine: SentinelMachine
    private var stream: ClientStream?
    private var reader = RedisReplyReader()
    private var timer: LoopTimer?
    /// Set by the pipeline before the first ``locate()`` (it holds the locator; the handler holds it weakly).
    var handler: Handler?

    init(
        configuration: SentinelMachine.Configuration, loop: EventLoop, tls: TLSClientContext?
    ) {
        self.loop = loop
        context = tls
        machine = SentinelMachine(configuration: configuration)
    }

    /// The pipeline needs the primary's address.
    func locate() {
        run(machine.locate(now: EventLoop.monotonicNow()))
    }

    /// The pipeline stopped waiting for an address (its connect timeout passed).
    func cancel() {
        run(machine.cancel())
    }

    /// The pipeline lost (or left) the primary it was given.
    func primaryLost() {
        machine.primaryLost()
    }

    /// Closes the connection and the timer for good.
    func close() {
        handler = nil
        closeStream()
        timer?.close()
        timer = nil
    }

    private func run(_ action: SentinelMachine.Action) {
        switch action {
        case .none, .write: break
        case .connect(let node):
            closeStream()
            reader = RedisReplyReader()
            stream = ClientStream.connect(
                on: loop, host: node.host, port: node.port,
                tls: context.map { ClientStream.TLS(context: $0, serverName: node.host) }, delegate: self)
        case .primary(let node): handler?.primary(node)
        case .moved(let node): handler?.moved(node)
        case .exhausted(let error):
            closeStream()
            handler?.exhausted(error)
        case .close: closeStream()
        }
        if !machine.output.isEmpty, let stream {
            stream.write(machine.output)
            machine.flushed()
        }
        armTimer()
    }

    private func closeStream() {
        guard let stream else { return }
        self.stream = nil
        stream.reset()
    }

    private func armTimer() {
        guard let deadline = machine.nextDeadline else {
            timer?.cancel()
            return
        }
        if timer == nil { timer = LoopTimer(on: loop) { [weak self] in self?.timerFired() } }
        timer?.schedule(at: deadline)
    }

    private func timerFired() {
        run(machine.timerFired(now: EventLoop.monotonicNow()))
    }
}

extension SentinelLocator: ClientStreamDelegate {
    func streamDidConnect(_ stream: ClientStream) {
        guard stream === self.stream else { return }
        run(machine.connected(now: EventLoop.monotonicNow()))
    }

    func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        guard stream === self.stream else { return }
        do throws(RedisClientError) {
            try reader.feed(bytes)
            while self.stream === stream, let reply = try reader.next() {
                run(machine.received(reply, now: EventLoop.monotonicNow()))
            }
        } catch {
            self.stream = nil
            stream.reset()
            run(machine.failed(error.reason, now: EventLoop.monotonicNow()))
        }
    }

    func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        guard stream === self.stream else { return }
        self.stream = nil
        run(machine.failed(RedisPipeline.error(failure).reason, now: EventLoop.monotonicNow()))
    }
}
