import Dispatch
import EventLoops
import Glibc
import HTTP1
import Synchronization
import TLS

/// The relay's HTTP/1.1 server (docs/DESIGN.md, "The HTTP front"), knowing nothing of routes: every request goes to an
/// ``HTTPHandler``. `threads` workers, each an event loop that accepts from a duplicate of one listening socket (not
/// `SO_REUSEPORT`, with which a second server on the same port would join the first silently instead of failing) and
/// owns the connections it accepted; each connection runs the strict ``HTTP1Connection`` machine.
///
/// It listens from `init` until ``stop()`` (or deinit). It never writes to standard output or error.
public final class HTTPServer: Sendable {
    /// The port the server is bound to (the chosen one when the configuration asked for port 0).
    public let port: UInt16
    /// The global connection limit in force: the configured one, lowered if the file descriptor limit is smaller.
    public let connectionLimit: Int

    let core: ServerCore
    private let lifecycle: Mutex<Lifecycle>

    private struct Lifecycle {
        var workers: [ServerWorker]
        /// A descriptor of the listening socket kept by the server itself, to end listening for good: a process
        /// forked at that moment (the tests start many) holds copies of every descriptor until it execs, and a
        /// socket closed only by its workers would go on accepting through those; `shutdown` ends it whatever holds
        /// it. -1 once closed.
        var listening: Int32
        /// The socket was passed to the process: it is never shut down (see ``HTTPServerConfiguration/passedSocket``).
        var passed: Bool
        var quiesced = false
    }

    /// Binds, starts listening and starts the server threads.
    ///
    /// - Parameter loops: the workers' event loops, one per ``HTTPServerConfiguration/threads``, when the caller owns
    ///   them (the relay runs its APNs and Redis clients on the same loops, so that a push never changes threads);
    ///   ``stop()`` then leaves them running for their owner to stop. Nil: the server makes and stops its own.
    public init(
        configuration: HTTPServerConfiguration, handler: some HTTPHandler, loops: [EventLoop]? = nil
    ) throws(HTTPServerError) {
        try Self.validate(configuration)
        if let loops, loops.count != configuration.threads {
            throw HTTPServerError(.invalidConfiguration, "one event loop per thread is needed")
        }
        Self.prepareProcess()
        let slots = Self.overCapSlots(configuration.connectionLimit)
        let limit = Self.affordableConnections(configuration.connectionLimit, besides: slots)
        let timeout =
            configuration.connectionTimeoutSeconds == 0
            ? Self.noDeadline : UInt64(configuration.connectionTimeoutSeconds) * 1_000_000_000
        let connection = HTTP1Connection.Configuration(
            limits: HTTP1RequestParser.Limits(
                maxTargetBytes: configuration.maxURLBytes, maxHeadBytes: configuration.maxHeaderBytes),
            timeout: timeout)
        let core = ServerCore(
            handler: handler, connection: connection,
            caps: ConnectionCaps(
                total: limit, perAddress: configuration.perAddressConnectionLimit, overCapSlots: slots),
            workers: configuration.threads, tls: configuration.tls.map(TLSFront.init))
        let backlog = Int32(clamping: min(limit, 4096))
        let socket: ListeningSocket.Opened
        if let passed = configuration.passedSocket {
            do {
                socket = try ListeningSocket.adopt(passed)
            } catch {
                close(passed)
                throw error
            }
        } else {
            socket = try ListeningSocket.open(host: configuration.host, port: configuration.port, backlog: backlog)
        }
        let listening = fcntl(socket.descriptor, F_DUPFD_CLOEXEC, 0)
        guard listening >= 0 else {
            close(socket.descriptor)
            throw HTTPServerError(.startFailed, "cannot duplicate the listening socket")
        }
        var workers: [ServerWorker] = []
        do throws(HTTPServerError) {
            for index in 0..<configuration.threads {
                // The first worker takes the socket itself, every other one a duplicate (the socket closes once
                // every worker has closed its descriptor).
                let descriptor = index == 0 ? socket.descriptor : fcntl(socket.descriptor, F_DUPFD_CLOEXEC, 0)
                guard descriptor >= 0 else {
                    throw HTTPServerError(.startFailed, "cannot duplicate the listening socket")
                }
                let worker: ServerWorker
                do throws(HTTPServerError) {
                    worker = try ServerWorker(index: index, core: core, loop: loops?[index])
                } catch {
                    close(descriptor)
                    throw error
                }
                workers.append(worker)
                try worker.listen(on: descriptor, backlog: backlog)
            }
        } catch {
            for worker in workers { worker.stop() }
            close(listening)
            throw error
        }
        self.port = socket.port
        self.connectionLimit = limit
        self.core = core
        self.lifecycle = Mutex(
            Lifecycle(workers: workers, listening: listening, passed: configuration.passedSocket != nil))
    }

    deinit {
        stop()
    }

    /// A deadline that never comes (`connectionTimeoutSeconds` 0): about 292 years.
    private static let noDeadline = UInt64(Int64.max)

    /// Requests handed to the handler and not answered yet.
    public var pendingResponses: Int {
        core.ledgers.total { $0.pending.load(ordering: .relaxed) }
    }

    /// Stops accepting connections (new attempts are refused from when this returns; with a passed socket they wait in
    /// its backlog for the next process instead); idle connections close at once,
    /// requests already received are still answered, each answer carrying `Connection: close` and closing its
    /// connection once written. ``waitUntilDrained(until:)`` then says when the last has closed. Idempotent.
    public func quiesce() {
        let workers = lifecycle.withLock { state -> [ServerWorker] in
            guard !state.quiesced else { return [] }
            state.quiesced = true
            return state.workers
        }
        core.quiesced.store(true, ordering: .relaxed)
        // The workers close their descriptors first, so that none of them sees the socket's end as an error.
        for worker in workers { worker.quiesce() }
        lifecycle.withLock { state in
            guard state.listening >= 0 else { return }
            if state.passed {
                // Another process holds it too (the service manager): shutting it down would reset the connections
                // waiting in its backlog, which the next process must accept. Only this descriptor closes.
                close(state.listening)
                state.listening = -1
            } else {
                shutdown(state.listening, Int32(SHUT_RDWR))
            }
        }
    }

    /// After ``quiesce()``: waits until every connection has closed (their last answers written), or until
    /// `deadline`. Returns whether the server is drained. Signalled by the last connection's close, never polled.
    public func waitUntilDrained(until deadline: DispatchTime) -> Bool {
        while core.caps.open > 0 {
            if core.drained.wait(timeout: deadline) == .timedOut {
                return core.caps.open == 0
            }
        }
        return true
    }

    /// Answers every request still waiting for the handler's answer with `answer(route)` (the route is the
    /// request's ``HTTPRequestHead/route``), each on the worker that owns its connection; the handler's own answer,
    /// should it come later, is ignored. For a stopping server whose grace period has ended: the server's workers hold
    /// every request in flight, so the handler keeps no list of its own. Returns once every worker has answered.
    public func answerWaiting(_ answer: @escaping @Sendable (_ route: Int) -> HTTP1Response) {
        let workers = lifecycle.withLock { $0.workers }
        for worker in workers { worker.answerWaiting(answer) }
    }

    /// Closes every connection and stops the server threads. Requests still waiting for an answer are dropped (their
    /// responders then do nothing). Idempotent.
    public func stop() {
        let workers = lifecycle.withLock { state -> [ServerWorker] in
            defer { state.workers = [] }
            return state.workers
        }
        core.quiesced.store(true, ordering: .relaxed)
        for worker in workers { worker.stop() }
        lifecycle.withLock { state in
            guard state.listening >= 0 else { return }
            if !state.passed { shutdown(state.listening, Int32(SHUT_RDWR)) }
            close(state.listening)
            state.listening = -1
        }
    }

    /// The workers (for tests).
    var workers: [ServerWorker] {
        lifecycle.withLock { $0.workers }
    }

    /// Connections accepted from now on run their TLS with `context` (a renewed certificate); open connections keep
    /// theirs. Nothing for a plain server.
    public func replaceTLSContext(_ context: TLSServerContext) {
        core.tls?.replace(with: context)
    }

    /// The certificate new connections are served, nil for a plain server.
    public var tlsCertificate: CertificateSummary? {
        core.tls?.current.leaf
    }

    /// TLS handshakes that failed, by kind (`protocol`, `alpn`, `timeout`, `other`; each present), empty for a plain
    /// server.
    public var tlsHandshakeFailures: [(kind: String, count: Int)] {
        core.tls?.failureCounts ?? []
    }

    /// Client connections counted against the caps now.
    public var connectionsOpen: Int { core.caps.open }

    /// Client connections refused at a cap since the start: answered 503 `overloaded` without finding room (or closed
    /// for sending no head), or closed at once when every over-cap slot was taken.
    public var connectionsRefused: Int { core.caps.refused }

    /// Request contexts the connections hold right now (for leak checks in tests).
    var openRequestContexts: Int {
        core.ledgers.total { $0.held.load(ordering: .relaxed) }
    }

    /// Request contexts alive, whoever holds them: a connection or a responder (for leak checks in tests).
    var liveRequestContexts: Int {
        core.ledgers.total { $0.alive.load(ordering: .relaxed) }
    }

    private static func validate(_ configuration: HTTPServerConfiguration) throws(HTTPServerError) {
        func check(_ condition: Bool, _ reason: String) throws(HTTPServerError) {
            if !condition { throw HTTPServerError(.invalidConfiguration, reason) }
        }
        try check((1...256).contains(configuration.threads), "threads must be between 1 and 256")
        try check(configuration.connectionLimit >= 1, "connectionLimit must be at least 1")
        try check(configuration.perAddressConnectionLimit >= 0, "perAddressConnectionLimit must not be negative")
        try check(configuration.connectionTimeoutSeconds >= 0, "connectionTimeoutSeconds must not be negative")
        try check(configuration.maxHeaderBytes >= 256, "maxHeaderBytes must be at least 256")
        try check(configuration.maxURLBytes >= 16, "maxURLBytes must be at least 16")
    }

    /// Once per process: a write to a closed socket must not kill it, and many connections need many descriptors.
    private static func prepareProcess() {
        _ = processPrepared
    }

    private static let processPrepared: Bool = {
        signal(SIGPIPE, SIG_IGN)
        var limit = rlimit()
        if getrlimit(fileLimitResource, &limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(fileLimitResource, &limit)
        }
        return true
    }()

    /// How many connections over a cap are held at once, each waiting for its head and room or for its 503 to be
    /// read: a quarter of the global cap, at least 16 and at most 4,096.
    static func overCapSlots(_ configured: Int) -> Int {
        max(16, min(configured / 4, 4096))
    }

    /// The configured limit, lowered to leave descriptors for the connections over a cap and the rest of the process.
    private static func affordableConnections(_ configured: Int, besides overCapSlots: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(fileLimitResource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return configured }
        let available = Int(clamping: limit.rlim_cur)
        let reserve = max(64, available / 16)
        return max(1, min(configured, available - reserve - overCapSlots))
    }
}

private let fileLimitResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
