import CMicroHTTPD
import Glibc
import Synchronization

/// An HTTP/1.1 server (keep-alive, asynchronous answers) over libmicrohttpd, knowing nothing of routes: every
/// request goes to an ``HTTPHandler``.
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
        var daemon: OpaquePointer?
        /// Accepts connections until quiesced or stopped (nil from then on).
        var acceptor: Acceptor?
    }

    /// Binds, starts listening and starts the server threads.
    public init(configuration: HTTPServerConfiguration, handler: some HTTPHandler) throws(HTTPServerError) {
        try Self.validate(configuration)
        Self.prepareProcess()
        let limit = Self.affordableConnections(configuration.connectionLimit)
        let socket = try ListeningSocket.open(
            host: configuration.host, port: configuration.port, backlog: Int32(clamping: min(limit, 4096)))
        let core = ServerCore(
            handler: handler, maxHeaderBytes: configuration.maxHeaderBytes, maxURLBytes: configuration.maxURLBytes)

        // An epoll thread pool; TURBO reads and writes before polling (about 15% more small requests per second
        // measured here), and every behaviour the tests check holds with it.
        // MHD does not accept: the Acceptor hands it every connection (see there why).
        var flags =
            MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ITC.rawValue
            | MHD_USE_TURBO.rawValue | MHD_USE_NO_LISTEN_SOCKET.rawValue
        if socket.isIPv6 {
            flags |= MHD_USE_IPv6.rawValue
        }
        // MHD keeps each connection's request line, headers and body chunks in a pool of this size, which it
        // zeroes after every request, so every open connection costs all of it (10,000 idle connections: about
        // 10,000 times this). Headers up to a few KiB over the limit still get our JSON 431/414; beyond the pool,
        // MHD answers 431/414 by itself (its own HTML body).
        let pool = max(8192, configuration.maxHeaderBytes + 4096)
        let coreOpaque = Unmanaged.passUnretained(core).toOpaque()
        // C function pointers cannot be CVarArgs; MHD reads them back through va_arg as the same pointer bits.
        func pointer<F>(_ function: F) -> OpaquePointer {
            unsafeBitCast(function, to: OpaquePointer.self)
        }
        let coreArgument = OpaquePointer(coreOpaque)
        var options: [CVarArg] = [
            MHD_OPTION.EXTERNAL_LOGGER.rawValue, pointer(DaemonCallbacks.discardLog), coreArgument,
            MHD_OPTION.CONNECTION_LIMIT.rawValue, UInt32(clamping: limit),
            MHD_OPTION.PER_IP_CONNECTION_LIMIT.rawValue, UInt32(clamping: configuration.perAddressConnectionLimit),
            MHD_OPTION.CONNECTION_TIMEOUT.rawValue, UInt32(clamping: configuration.connectionTimeoutSeconds),
            MHD_OPTION.CONNECTION_MEMORY_LIMIT.rawValue, pool,
            MHD_OPTION.URI_LOG_CALLBACK.rawValue, pointer(DaemonCallbacks.uriLog), coreArgument,
            MHD_OPTION.NOTIFY_COMPLETED.rawValue, pointer(DaemonCallbacks.requestCompleted), coreArgument,
        ]
        if configuration.threads > 1 {
            options += [MHD_OPTION.THREAD_POOL_SIZE.rawValue, UInt32(clamping: configuration.threads)]
        }
        options.append(MHD_OPTION.END.rawValue)
        let daemon = withVaList(options) { arguments in
            MHD_start_daemon_va(flags, 0, nil, nil, DaemonCallbacks.access, coreOpaque, arguments)
        }
        guard let daemon else {
            close(socket.descriptor)
            throw HTTPServerError(.startFailed, "libmicrohttpd could not start (threads, memory or descriptors)")
        }
        let acceptor: Acceptor
        do throws(HTTPServerError) {
            acceptor = try Acceptor(listener: socket.descriptor, daemon: daemon)
            try acceptor.start()
        } catch {
            MHD_stop_daemon(daemon)
            close(socket.descriptor)
            throw error
        }
        self.port = socket.port
        self.connectionLimit = limit
        self.core = core
        self.lifecycle = Mutex(Lifecycle(daemon: daemon, acceptor: acceptor))
    }

    deinit {
        stop()
    }

    /// Requests handed to the handler and not answered yet.
    public var pendingResponses: Int {
        core.counters.pending.load(ordering: .relaxed)
    }

    /// Stops accepting connections (new attempts are refused); requests already received are still answered, and
    /// every later answer carries `Connection: close`. Idempotent.
    public func quiesce() {
        lifecycle.withLock { state in
            guard let acceptor = state.acceptor else { return }
            core.quiesced.store(true, ordering: .relaxed)
            state.acceptor = nil
            // The socket is shut down and closed: the kernel refuses new connections and resets queued ones now.
            acceptor.stop()
        }
    }

    /// Closes every connection and stops the server threads. Requests still waiting for an answer are dropped (their
    /// responders then do nothing). Idempotent.
    public func stop() {
        // MHD_stop_daemon waits for the server threads, so no lock is held while it runs.
        let taken = lifecycle.withLock { state -> (daemon: OpaquePointer, acceptor: Acceptor?)? in
            guard let daemon = state.daemon else { return nil }
            state.daemon = nil
            defer { state.acceptor = nil }
            return (daemon, state.acceptor)
        }
        guard let (daemon, acceptor) = taken else { return }
        // No connection is handed to MHD from now on (its thread has ended before MHD stops).
        acceptor?.stop()
        core.quiesced.store(true, ordering: .relaxed)
        // MHD aborts if it stops with suspended connections; from now on none are suspended (see handOver).
        let suspended = core.suspended.withLock { registry in
            registry.stopping = true
            defer { registry.contexts = [:] }
            return Array(registry.contexts.values)
        }
        for context in suspended {
            context.resumeForStop()
        }
        MHD_stop_daemon(daemon)
    }

    /// Request contexts MHD holds right now (for leak checks in tests).
    var openRequestContexts: Int {
        core.openContexts.load(ordering: .relaxed)
    }

    /// Request contexts alive, whoever holds them: MHD, a responder, or the suspended registry (for leak checks in
    /// tests).
    var liveRequestContexts: Int {
        core.counters.liveContexts.load(ordering: .relaxed)
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

    /// The configured limit, lowered to leave descriptors for the rest of the process.
    private static func affordableConnections(_ configured: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(fileLimitResource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return configured }
        let available = Int(clamping: limit.rlim_cur)
        let reserve = max(64, available / 16)
        return max(1, min(configured, available - reserve))
    }
}

private let fileLimitResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
