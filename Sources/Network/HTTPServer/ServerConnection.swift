import EventLoops
import HTTP1
import MonotonicTime
import TLS

/// One client connection on its worker's loop: the shell around ``HTTP1Conversation`` (and its ``HTTP1Connection``).
/// It gives the conversation what the socket, the timer and the handler say, carries out the actions it returns, and
/// hands the handler what they hand up. Loop-bound: every method runs on the worker's loop thread.
///
/// With TLS (docs/DESIGN.md, "TLS"), the socket's bytes go through the connection's TLS session on the same loop: a
/// ``ServerHandshake`` phase first (the handshake inside the first request's deadline), then the conversation reads
/// and writes plaintext through the session. The session's records pass through a ``StreamBIO``, never copied on
/// the way in.
///
/// Ownership: the worker's table and the socket (its delegate) hold the connection until the socket's close callback;
/// the connection holds its timer and its TLS session (freed there) until then. Responders and pending decisions reach
/// it through a weak ``ConnectionReference``.
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
    /// Decides what the machine is told and when.
    private var conversation: HTTP1Conversation
    /// The one timer for the machine's deadline; created at the first deadline.
    private var timer: LoopTimer?
    /// The head handed to the handler, until the request is handed over or answered (the route is resolved once).
    private var head: HTTPRequestHead?
    /// The request with the handler, until answered.
    private var context: RequestContext?
    /// The head decision the connection waits for.
    private var pendingDecision: PendingHeadDecision?
    private var closed = false
    /// What the connection holds of the caps (``ConnectionCaps``), given back once, as the socket closes.
    private var caps: CapsHeld
    /// With TLS: the handshake's phase (kept once open), the session, and the records between it and the socket.
    private var handshake: ServerHandshake?
    private var session: TLSSession?
    private var records: StreamBIO?

    private struct CapsHeld {
        /// Counted against the caps.
        var counted: Bool
        /// Over a cap: holds an over-cap slot.
        var overCap: Bool
        /// Over a cap and waiting for room.
        var waiting = false
        /// The wait for room is over, and the connection waits for every loop's turn before its last try.
        var awaitingTurns = false
    }

    init(core: ServerCore, worker: ServerWorker, socket: TCPConnection, peer: SocketPeer, overCap: Bool = false) {
        self.core = core
        self.worker = worker
        ledger = worker.ledger
        self.socket = socket
        self.peer = peer
        caps = CapsHeld(counted: !overCap, overCap: overCap)
        let accepted = EventLoop.monotonicNow()
        // Made at the accept: its first deadline is the handshake's too.
        conversation = HTTP1Conversation(configuration: core.connection, now: accepted, overCap: overCap)
        if let tls = core.tls {
            let records = StreamBIO()
            self.records = records
            session = tls.current.session(through: records)
            // Over a cap the request's head is due within a short time of the accept, and the handshake comes first.
            let timeout =
                overCap ? min(core.connection.timeout, core.connection.overCapHeadTimeout) : core.connection.timeout
            handshake = ServerHandshake(acceptedAt: accepted, timeout: timeout)
        }
        reference = ConnectionReference(loop: socket.loop, connection: self)
    }

    /// The machine's clock, read once per input.
    private var now: Instant { EventLoop.monotonicNow() }

    /// Starts reading and arms the idle deadline (with TLS, the handshake's, which is the same).
    func start() {
        socket.delegate = self
        if handshake != nil {
            guard session != nil else {
                closeSocket()
                return
            }
            // Accepted as the server stops: the client connected before the stop, and is served as a drain serves.
            let action =
                core.quiesced.load(ordering: .relaxed)
                ? handshake!.drain(now: now, wait: core.connection.drainHeadWait) : handshake!.start
            carryOut(action)
            return
        }
        run(conversation.start(draining: core.quiesced.load(ordering: .relaxed), now: now))
    }

    /// The server is shutting down: the next answer closes the connection.
    func drain() {
        guard !closed else { return }
        if handshake?.phase == .handshaking {
            carryOut(handshake!.drain(now: now, wait: core.connection.drainHeadWait))
            return
        }
        run(conversation.drain(now: now))
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
        respond(response)
    }

    /// A head decision that came later.
    func decided(_ decision: HeadDecision, by pending: PendingHeadDecision) {
        guard pending === pendingDecision, !closed else { return }
        pendingDecision = nil
        run(conversation.decidedLater(decision.plain, now: now))
    }

    // MARK: - From the socket

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        guard let records, let session else {
            run(conversation.received(bytes, now: now))
            return
        }
        records.reading(bytes) {
            if handshake?.phase == .handshaking {
                guard carryOut(handshake!.received(bytes, now: now)) else { return }
            }
            readPlaintext(session)
        }
        flushRecords()
    }

    func connectionDidReachEnd(_ connection: TCPConnection) {
        guard !closed else { return }
        if handshake?.phase == .handshaking {
            carryOut(handshake!.peerClosed())
            return
        }
        run(conversation.peerClosed(now: now))
    }

    func connection(_ connection: TCPConnection, didFail error: LoopError) {
        closeSocket()
    }

    func connectionDidFinishWriting(_ connection: TCPConnection) {
        // The handshake's records have no writer waiting for them.
        guard !closed, handshake?.phase != .handshaking else { return }
        run(conversation.writeFinished(now: now))
    }

    func connectionDidClose(_ connection: TCPConnection) {
        closed = true
        timer?.close()
        timer = nil
        // The socket is gone: nothing reads or writes through the session any more.
        session?.free()
        session = nil
        records = nil
        if let context {
            self.context = nil
            ledger.held.subtract(1, ordering: .relaxed)
            context.drop()
        }
        pendingDecision?.abandon()
        pendingDecision = nil
        head = nil
        reference.connection = nil
        releaseCaps()
        worker.remove(self)
    }

    // MARK: - The caps

    /// Over a cap: asks the caps for room and tells the machine (now, or when a closing connection wakes the
    /// worker: ``ServerWorker``).
    func askForRoom() {
        guard !closed, caps.overCap else { return }
        guard conversation.connection.isAwaitingRoom else {
            stopWaitingForRoom()
            return
        }
        let room = core.caps.admitLater(peer, waiting: caps.waiting)
        if room {
            caps = CapsHeld(counted: true, overCap: false)
        } else if !caps.waiting {
            caps.waiting = true
        }
        worker.setWaiting(self, caps.waiting)
        run(conversation.admission(room: room, now: now))
    }

    /// The wait for room is over: one more try once every loop has read what is ready now, then the machine's answer.
    /// The close that makes room may still be unread: by another worker, whose thread a loaded machine may not have
    /// run since (each close read there wakes this connection), or by this one, whose timers run before its reads in
    /// each turn (work enqueued twice runs after the next turn's reads). Without those turns a client that never held
    /// more than its cap would be refused.
    private func roomWaitEnded() {
        guard !caps.awaitingTurns else { return }
        caps.awaitingTurns = true
        let loop = socket.loop
        worker.afterOtherWorkersTurn(within: Self.turnsBound) { [weak self] in
            loop.enqueue { [weak self] in
                loop.enqueue { [weak self] in
                    guard let self, !closed else { return }
                    caps.awaitingTurns = false
                    askForRoom()
                    if conversation.connection.isAwaitingRoom { run(conversation.deadlineReached(now: now)) }
                }
            }
        }
    }

    /// The longest a connection over a cap waits for the other workers' turns once its wait for room is over, in
    /// milliseconds: a worker stuck longer is not waited for.
    static let turnsBound: UInt64 = 5_000

    private func stopWaitingForRoom() {
        guard caps.waiting else { return }
        caps.waiting = false
        core.caps.stopWaiting()
        worker.setWaiting(self, false)
    }

    /// Gives back what the connection holds of the caps: as the server closes the socket (the client's next
    /// connection may come in the same turn of the loop), or as the handle closes when something else closed it.
    private func releaseCaps() {
        let held = caps
        caps = CapsHeld(counted: false, overCap: false)
        if held.counted { core.connectionClosed(peer) }
        if held.overCap { core.caps.leave(waiting: held.waiting) }
        if held.waiting { worker.setWaiting(self, false) }
    }

    // MARK: - Carrying out the conversation's actions

    /// Carries out `first`, then every action that inputs coming meanwhile lead to, in order.
    private func run(_ first: HTTP1Connection.Action?) {
        guard var action = first, !closed else { return }
        repeat {
            perform(action)
        } while !closed && conversation.actionDone(&action, now: now)
        if caps.waiting && !closed && !conversation.connection.isAwaitingRoom { stopWaitingForRoom() }
    }

    private func perform(_ action: HTTP1Connection.Action) {
        if action.close {
            closeSocket()
            return
        }
        if let bytes = action.write, session == nil ? socket.write(bytes) : writeThroughTLS(bytes) {
            _ = conversation.writeFinished(now: now)  // queued: the action is still being carried out
        }
        guard !closed else { return }
        if action.shutdownWrite {
            if let session {
                session.shutdown()
                flushRecords()
            }
            socket.shutdownOutput()
        }
        schedule(action.deadline)
        if action.isReading != socket.isReading {
            if action.isReading { socket.startReading() } else { socket.stopReading() }
        }
        if let handUp = action.handUp {
            ask(handUp)
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
                if handshake?.phase == .handshaking {
                    carryOut(handshake!.deadlineReached(now: now))
                    return
                }
                if caps.waiting {
                    roomWaitEnded()
                    return
                }
                run(conversation.deadlineReached(now: now))
            }
        }
        timer!.schedule(at: deadline)
    }

    private func closeSocket() {
        guard !closed else { return }
        closed = true
        timer?.cancel()
        // An open TLS session ends with its close_notify when the socket takes it at once (never waited for: a
        // client that does not read must not hold the connection).
        if let session, handshake?.phase == .open, socket.queuedWriteCount == 0 {
            session.shutdown()
            flushRecords()
        }
        socket.close()
        releaseCaps()
    }

    // MARK: - TLS

    /// Carries out the handshake's action (and those it leads to); true when the connection has just opened.
    @discardableResult
    private func carryOut(_ first: ServerHandshake.Action) -> Bool {
        var action = first
        while !closed, let session {
            switch action {
            case .step:
                let step: ServerHandshake.Step
                switch session.acceptStep() {
                case .done: step = .done
                case .inProgress: step = .inProgress
                case .failed(let failure): step = .failed(ServerHandshake.Failure(failure))
                }
                // The server's flight, or its alert.
                flushRecords()
                action = handshake!.stepped(step, now: now)
            case .wait(let deadline):
                schedule(deadline)
                if !socket.isReading { socket.startReading() }
                return false
            case .open:
                run(conversation.start(draining: core.quiesced.load(ordering: .relaxed), now: now))
                return !closed
            case .close(let failure):
                if let failure { core.tls?.count(failure) }
                closeSocket()
                return false
            }
        }
        return false
    }

    /// Hands the conversation the plaintext of every record received, until TLS needs more.
    private func readPlaintext(_ session: TLSSession) {
        let buffer = worker.plaintext
        while !closed {
            switch session.read(into: buffer) {
            case .read(let count):
                run(conversation.received(UnsafeRawBufferPointer(rebasing: buffer[..<count]), now: now))
            case .wantsMore:
                return
            case .closed:
                // The client's close_notify: its end of input.
                run(conversation.peerClosed(now: now))
                return
            case .failed:
                closeSocket()
                return
            }
        }
    }

    /// Encrypts an answer and writes its records; true when the socket took them all at once (as `socket.write`).
    private func writeThroughTLS(_ bytes: [UInt8]) -> Bool {
        guard let session else { return false }
        let taken = bytes.withUnsafeBytes { plain -> Bool in
            var offset = 0
            while offset < plain.count {
                guard case .wrote(let count) = session.write(UnsafeRawBufferPointer(rebasing: plain[offset...])) else {
                    return false
                }
                offset += count
            }
            return true
        }
        guard taken else {
            closeSocket()
            return false
        }
        var all = true
        records?.flush(keepingCapacity: false) { all = socket.write($0) }
        return all
    }

    /// Writes whatever TLS has written (handshake messages, alerts, a close_notify). The records' buffer is not kept
    /// between writes: an idle connection holds none (10,000 idle connections: 9 MB less).
    private func flushRecords() {
        records?.flush(keepingCapacity: false) { _ = socket.write($0) }
    }

    private func respond(_ response: HTTP1Response) {
        guard !closed else { return }
        run(conversation.respond(response, now: now))
    }

    // MARK: - The handler

    private func ask(_ handUp: HTTP1Connection.HandUp) {
        switch handUp {
        case .head(let parsed):
            let head = makeHead(parsed)
            self.head = head
            let decision = core.handler.head(head)
            run(conversation.decide(decision.plain, now: now))
            if case .later(let pending) = decision { wait(for: pending) }
        case .request(let parsed, let body):
            let head = takeHead(parsed)
            let context = RequestContext(ledger: ledger, reference: reference, route: head.route)
            self.context = context
            ledger.held.add(1, ordering: .relaxed)
            core.handler.request(head, body: body, responder: HTTPResponder(context: context))
        case .bodyTooLarge(let parsed, _):
            respond(core.handler.bodyTooLarge(takeHead(parsed)))
        case .refused(let parsed, let error, let followsHead):
            let head = followsHead ? takeHead(parsed) : makeHead(parsed)
            respond(core.handler.refused(head, refusal: HTTPRefusal(error, followsHead: followsHead)))
        case .admission:
            askForRoom()
        }
    }

    /// The decision now if it has come, else once it comes (``decided(_:by:)``).
    private func wait(for pending: PendingHeadDecision) {
        if let decided = pending.take(orWaitWith: reference) {
            run(conversation.decidedLater(decided.plain, now: now))
        } else {
            pendingDecision = pending
        }
    }

    /// The head handed to the handler with ``HTTP1Connection/HandUp/head(_:)`` for the request asked about now.
    private func takeHead(_ parsed: HTTP1RequestHead) -> HTTPRequestHead {
        defer { head = nil }
        return head ?? makeHead(parsed)
    }

    private func makeHead(_ parsed: HTTP1RequestHead) -> HTTPRequestHead {
        HTTPRequestHead(
            method: parsed.method, path: parsed.path, headers: parsed.headers, peer: peer,
            contentLength: parsed.contentLength, route: core.handler.route(path: parsed.path), worker: worker.index,
            peerMemo: peerMemo)
    }
}
