import EventLoops
import Glibc
import HTTP1

/// One worker of an ``HTTPServer``: an event loop on a thread of its own, its descriptor of the server's one
/// listening socket (every worker accepts from it; see ``HTTPServer``) and the connections it accepted, which it owns
/// for their whole life (docs/DESIGN.md, "Worker model").
// @unchecked Sendable: `listener` and `connections` are used only on `loop`'s thread (every method but `init` and
// `stop` runs there, through `loop.execute` or `performAndWait`); `loop` and `core` never change.
final class ServerWorker: @unchecked Sendable {
    let loop: EventLoop
    /// The worker's number, handed to the handler with every head (``HTTPRequestHead/worker``).
    let index: Int
    /// This worker's record of the requests it holds.
    let ledger: WorkerLedger
    private let core: ServerCore
    private var listener: TCPListener?
    private var connections: [ObjectIdentifier: ServerConnection] = [:]
    /// This worker's connections over a cap that wait for room (``ConnectionCaps``).
    private var waiting: [ObjectIdentifier: ServerConnection] = [:]
    /// Where a TLS connection's records are decrypted to, one at a time (a record holds at most 16 KiB): lent to each
    /// connection while it reads, on this loop only.
    let plaintext = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)

    /// The worker made its loop (and stops it); false for a loop its caller owns.
    private let ownsLoop: Bool

    /// A worker on `loop` (its owner's, left running by ``stop()``), or on a loop of its own.
    init(index: Int, core: ServerCore, loop: EventLoop? = nil) throws(HTTPServerError) {
        self.index = index
        if let loop {
            self.loop = loop
            ownsLoop = false
        } else {
            do {
                self.loop = try EventLoop(name: "duo-http-\(index)")
            } catch {
                throw HTTPServerError(.startFailed, "cannot start a server thread: " + error.reason)
            }
            ownsLoop = true
        }
        self.core = core
        ledger = core.ledgers[index]
        registerWaker()
    }

    /// Lets a connection closing on any worker wake this one's connections waiting for room, and a connection over a
    /// cap on another worker wait for this one's turn.
    private func registerWaker() {
        // Weak: the server's core outlives a stopped worker.
        core.roomWakers.withLock {
            $0.append { [weak self] in
                guard let self else { return }
                _ = loop.execute { self.roomMayHaveCome() }
            }
        }
        // Work handed over runs among the turn's reads (the wake-up is one of the events the loop polled); enqueued
        // from there, it runs at the next turn, once every read of this one is done.
        core.turnTakers.withLock { takers in
            takers[index] = { [weak self] done in
                guard let self, loop.execute({ [loop] in loop.enqueue(done) }) else { return done() }
            }
        }
    }

    /// Runs `done` on this worker's loop once every other worker's loop has read what was ready when this is called
    /// (a close read there makes room, and wakes the connections waiting for it), or once `bound` milliseconds have
    /// passed, whichever comes first: a worker whose thread the machine has not run for a while is waited for, a
    /// worker that never turns is not. On this worker's loop.
    func afterOtherWorkersTurn(within bound: UInt64, _ done: @escaping () -> Void) {
        loop.preconditionCurrent()
        let others = core.turnTakers.withLock { takers in takers.filter { $0.key != index }.map(\.value) }
        guard !others.isEmpty else { return done() }
        let loop = self.loop
        let wait = LoopBound((remaining: others.count, done: Optional(done), timer: LoopTimer?.none), on: loop)
        @Sendable func finish() {
            guard let done = wait.value.done else { return }
            wait.value.done = nil
            wait.value.timer?.close()
            wait.value.timer = nil
            done()
        }
        let timer = LoopTimer(on: loop) { finish() }
        wait.value.timer = timer
        timer.schedule(afterMilliseconds: bound)
        for take in others {
            take {
                _ = loop.execute {
                    wait.value.remaining -= 1
                    if wait.value.remaining == 0 { finish() }
                }
            }
        }
    }

    deinit {
        plaintext.deallocate()
    }

    /// Accepts from `descriptor` (the server's listening socket or a duplicate of it), which the worker owns from
    /// here (closed even when this throws).
    func listen(on descriptor: Int32, backlog: Int32) throws(HTTPServerError) {
        let failure: LoopError?
        do {
            failure = try loop.performAndWait { [self] in
                do throws(LoopError) {
                    listener = try TCPListener(on: loop, adopting: descriptor, backlog: backlog) {
                        [unowned self] socket in accepted(socket)
                    }
                    return nil
                } catch {
                    return error
                }
            }
        } catch {
            close(descriptor)
            throw HTTPServerError(.startFailed, "the server thread has stopped")
        }
        if let failure {
            throw HTTPServerError(.startFailed, "a server thread cannot listen: " + failure.reason)
        }
    }

    private func accepted(_ socket: TCPConnection) {
        // An address family the caps cannot key, or over a cap with every over-cap slot taken: closed at once.
        guard let address = socket.peerAddress, let peer = SocketPeer(bytes: address.bytes) else {
            socket.close()
            return
        }
        let admission = core.caps.admit(peer)
        guard admission != .refused else {
            socket.close()
            return
        }
        let connection = ServerConnection(
            core: core, worker: self, socket: socket, peer: peer, overCap: admission == .overCap)
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    /// Called by a connection once its socket has closed.
    func remove(_ connection: ServerConnection) {
        connections[ObjectIdentifier(connection)] = nil
        waiting[ObjectIdentifier(connection)] = nil
    }

    /// A connection over a cap waits for room (true) or no longer does (false).
    func setWaiting(_ connection: ServerConnection, _ isWaiting: Bool) {
        waiting[ObjectIdentifier(connection)] = isWaiting ? connection : nil
    }

    /// A counted connection closed somewhere: every connection of this worker waiting for room asks again.
    private func roomMayHaveCome() {
        for connection in Array(waiting.values) { connection.askForRoom() }
    }

    /// Stops accepting (this worker's descriptor of the listening socket closes; the socket itself once every
    /// worker's has) and makes every later answer close its connection. Returns once done.
    func quiesce() {
        let work: @Sendable () -> Void = { [self] in
            listener?.stopAccepting()
            listener = nil
            for connection in connections.values { connection.drain() }
        }
        if loop.isCurrent {
            work()
        } else {
            _ = try? loop.performAndWait(work)
        }
    }

    /// Answers every request of this worker still waiting for the handler with `answer(route)`. Returns once done.
    func answerWaiting(_ answer: @escaping @Sendable (_ route: Int) -> HTTP1Response) {
        let work: @Sendable () -> Void = { [self] in
            for connection in Array(connections.values) { connection.answerWaiting(answer) }
        }
        if loop.isCurrent {
            work()
        } else {
            _ = try? loop.performAndWait(work)
        }
    }

    /// Closes the listener and every connection, then ends the loop and its thread when the worker made it.
    func stop() {
        _ = try? loop.performAndWait { [self] in
            listener?.close()
            listener = nil
            for connection in Array(connections.values) { connection.closeNow() }
        }
        if ownsLoop { loop.stop() }
    }
}
