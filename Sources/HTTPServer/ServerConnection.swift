import HTTP1
import Loop
import MonotonicTime

/// One client connection on its worker's loop: the shell around ``HTTP1Connection``. It feeds the machine what the
/// socket, the timer and the handler say, and carries out the actions the machine returns. Loop-bound: every method
/// runs on the worker's loop thread.
///
/// Ownership: the worker's table and the socket (its delegate) hold the connection until the socket's close callback;
/// the connection holds its timer until then. Responders and pending decisions reach it through a weak
/// ``ConnectionReference``.
final class ServerConnection: TCPConnectionDelegate {
    private let core: ServerCore
    private unowned let worker: ServerWorker
    /// The worker's record of the requests it holds (held here, not reached through the unowned `worker` on every
    /// request).
    private let ledger: WorkerLedger
    private let socket: TCPConnection
    let peer: SocketPeer
    /// Handed to the handler with every head: what it works out from `peer` once for the connection.
    private let peerMemo = PeerMemo()
    private(set) var reference: ConnectionReference!
    private var machine: HTTP1Connection
    /// The one timer for the machine's deadline; created at the first deadline.
    private var timer: LoopTimer?
    /// The head handed to the handler, until the request is handed over or answered (the route is resolved once).
    private var head: HTTPRequestHead?
    /// The request with the handler, until answered.
    private var context: RequestContext?
    /// The head decision the connection waits for.
    private var pendingDecision: PendingHeadDecision?
    /// Inputs that came while an action was carried out (an answer given inside a handler call, a write done at
    /// once): fed to the machine in order once the action is done, so that the machine never sees an input nested
    /// in another.
    private var inputs: [Input] = []
    private var busy = false
    private var closed = false

    private enum Input {
        case writeFinished
        case respond(HTTP1Response)
        case readBody(limit: Int)
    }

    init(core: ServerCore, worker: ServerWorker, socket: TCPConnection, peer: SocketPeer) {
        self.core = core
        self.worker = worker
        ledger = worker.ledger
        self.socket = socket
        self.peer = peer
        machine = HTTP1Connection(configuration: core.connection, now: EventLoop.monotonicNow())
        reference = ConnectionReference(loop: socket.loop, connection: self)
    }

    /// The machine's clock, read once per input.
    private var now: Instant { EventLoop.monotonicNow() }

    /// Starts reading and arms the idle deadline.
    func start() {
        socket.delegate = self
        if core.quiesced.load(ordering: .relaxed) {
            _ = machine.drain(now: now)
        }
        run(machine.current)
    }

    /// The server is shutting down: the next answer closes the connection.
    func drain() {
        guard !closed else { return }
        if busy {
            // Only from inside a handler call; the flag is read when the answer is made.
            _ = machine.drain(now: now)
        } else {
            run(machine.drain(now: now))
        }
    }

    /// The server answers the request waiting for the handler, if any, in the handler's stead (a later answer from
    /// the handler is then ignored).
    func answerWaiting(_ answer: (_ route: Int) -> HTTP1Response) {
        guard let context else { return }
        context.deliver(answer(context.route))
    }

    /// Closes at once (the server stops).
    func closeNow() {
        closeSocket()
    }

    // MARK: - From the handler (on the loop)

    /// The answer to the request in `context`; ignored when the connection has moved on (it closed).
    func answer(_ response: HTTP1Response, for context: RequestContext) {
        guard context === self.context else { return }
        self.context = nil
        ledger.held.subtract(1, ordering: .relaxed)
        feed(.respond(response))
    }

    /// A head decision that came later.
    func decided(_ decision: HeadDecision, by pending: PendingHeadDecision) {
        guard pending === pendingDecision else { return }
        pendingDecision = nil
        take(decision)
    }

    // MARK: - From the socket

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        run(machine.received(bytes, now: now))
    }

    func connectionDidReachEnd(_ connection: TCPConnection) {
        guard !closed else { return }
        run(machine.peerClosed(now: now))
    }

    func connection(_ connection: TCPConnection, didFail error: LoopError) {
        closeSocket()
    }

    func connectionDidFinishWriting(_ connection: TCPConnection) {
        feed(.writeFinished)
    }

    func connectionDidClose(_ connection: TCPConnection) {
        closed = true
        timer?.close()
        timer = nil
        if let context {
            self.context = nil
            ledger.held.subtract(1, ordering: .relaxed)
            context.drop()
        }
        pendingDecision?.abandon()
        pendingDecision = nil
        head = nil
        inputs = []
        reference.connection = nil
        core.connectionClosed(peer)
        worker.remove(self)
    }

    // MARK: - Driving the machine

    private func feed(_ input: Input) {
        guard !closed else { return }
        if busy {
            inputs.append(input)
            return
        }
        run(step(input))
    }

    private func step(_ input: Input) -> HTTP1Connection.Action {
        switch input {
        case .writeFinished: machine.writeFinished(now: now)
        case .respond(let response): machine.respond(response, now: now)
        case .readBody(let limit): machine.readBody(limit: limit, now: now)
        }
    }

    /// Carries out `first`, then every input that carrying it out produced, in order.
    private func run(_ first: HTTP1Connection.Action) {
        busy = true
        var next: HTTP1Connection.Action? = first
        while let action = next, !closed {
            perform(action)
            next = inputs.isEmpty || closed ? nil : step(inputs.removeFirst())
        }
        busy = false
    }

    private func perform(_ action: HTTP1Connection.Action) {
        if action.close {
            closeSocket()
            return
        }
        if let bytes = action.write, socket.write(bytes) {
            inputs.append(.writeFinished)
        }
        if action.shutdownWrite {
            socket.shutdownOutput()
        }
        schedule(action.deadline)
        if action.isReading != socket.isReading {
            if action.isReading { socket.startReading() } else { socket.stopReading() }
        }
        if let handUp = action.handUp {
            hand(handUp)
        }
    }

    private func schedule(_ deadline: Instant?) {
        guard let deadline else {
            timer?.cancel()
            return
        }
        if timer == nil {
            timer = LoopTimer(on: socket.loop) { [unowned self] in
                guard !closed else { return }
                run(machine.deadlineReached(now: now))
            }
        }
        timer!.schedule(at: deadline)
    }

    private func closeSocket() {
        guard !closed else { return }
        closed = true
        timer?.cancel()
        socket.close()
    }

    // MARK: - The handler

    private func hand(_ handUp: HTTP1Connection.HandUp) {
        switch handUp {
        case .head(let parsed):
            let head = makeHead(parsed)
            self.head = head
            take(core.handler.head(head))
        case .request(let parsed, let body):
            let head = self.head ?? makeHead(parsed)
            self.head = nil
            let context = RequestContext(ledger: ledger, reference: reference, route: head.route)
            self.context = context
            ledger.held.add(1, ordering: .relaxed)
            core.handler.request(head, body: body, responder: HTTPResponder(context: context))
        case .refused(let parsed, let error, let followsHead):
            let head = self.head ?? makeHead(parsed)
            self.head = nil
            let response =
                error.code == .bodyTooLarge
                ? core.handler.bodyTooLarge(head)
                : core.handler.refused(head, refusal: HTTPRefusal(error, followsHead: followsHead))
            feed(.respond(response))
        }
    }

    private func take(_ decision: HeadDecision) {
        switch decision {
        case .respond(let response):
            head = nil
            feed(.respond(response))
        case .readBody(let limit):
            feed(.readBody(limit: limit))
        case .later(let pending):
            if let decided = pending.take(orWaitWith: reference) {
                if case .later = decided {
                    take(.respond(HTTP1Response(status: 500)))
                } else {
                    take(decided)
                }
            } else {
                pendingDecision = pending
            }
        }
    }

    private func makeHead(_ parsed: HTTP1RequestHead) -> HTTPRequestHead {
        HTTPRequestHead(
            method: parsed.method, path: parsed.path, headers: parsed.headers, peer: peer,
            contentLength: parsed.contentLength, route: core.handler.route(path: parsed.path), worker: worker.index,
            peerMemo: peerMemo)
    }
}
