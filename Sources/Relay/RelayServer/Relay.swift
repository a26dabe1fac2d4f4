import CSystem
import Dispatch
import EventLoops
import Foundation
import HTTP2Client
import HTTPServer
import RelayCore
import Synchronization
import TLS

/// A running relay: its HTTP server, its APNs gateways, and its lifecycle (docs/DESIGN.md, "Lifecycle").
public final class Relay: Sendable {
    private let service: RelayHTTPHandler
    /// The workers' event loops (docs/DESIGN.md, "Worker model"): each runs the HTTP connections it accepted and its
    /// own APNs and Redis connections, so that a push is read, limited, sent and answered on one thread. The
    /// relay owns them: the server leaves them running when it stops, and `stop()` ends them last.
    private let loops: [EventLoop]
    private let server: HTTPServer
    private let metricsServer: HTTPServer?
    private let clock: any RelayClock
    /// Signalled once when a stop is asked for: by SIGTERM or SIGINT, or by a call of `stop()`.
    private let stopRequested = DispatchSemaphore(value: 0)
    /// Signalled when the stop is done (and passed on by every caller that waited for it).
    private let stopped = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    /// The maintenance timer, on the first worker's loop.
    private let maintenance: LoopBound<LoopTimer>?
    /// Gateways a reload replaced, until their pushes have had time to finish (a stop's grace end answers theirs
    /// too).
    private let retiredGateways = Mutex<[APNsGateway]>([])
    /// Where a reload gets its new setup (re-reading the configuration file and secrets).
    private let reloadSource: (@Sendable () -> Result<RelaySetup, ConfigurationError>)?

    /// Starts serving at once.
    /// - Parameter reload: what SIGHUP re-reads; nil: SIGHUP is ignored.
    public init(
        setup: RelaySetup, clock: any RelayClock = SystemClock(),
        reload: (@Sendable () -> Result<RelaySetup, ConfigurationError>)? = nil
    ) throws {
        _ = Self.mallocLimited
        let config = setup.configuration
        self.clock = clock
        reloadSource = reload
        let loops = try Self.workerLoops(config.server.threads)
        self.loops = loops
        // Name lookups (APNs' hosts, a Redis by name) run on libuv's thread pool: started now, with the workers,
        // rather than by the first push after start-up.
        do {
            try loops[0].performAndWait { try HostResolver.startPool(on: loops[0]) }
        } catch {
            for loop in loops { loop.stop() }
            throw ConfigurationError(.invalid, "server.threads", "cannot start the workers' thread pool: \(error)")
        }
        let gateways: [APNsEnvironment: APNsGateway]
        let limitsStore: SharedLimitsStore?
        do {
            gateways = try Self.gateways(setup, clock: clock, loops: loops)
        } catch {
            for loop in loops { loop.stop() }
            throw error
        }
        do {
            limitsStore = try Self.limitsStore(
                config, password: setup.secrets.redisPassword,
                sentinelPassword: setup.secrets.redisSentinelPassword, loops: loops)
        } catch {
            for gateway in gateways.values { gateway.shutdown() }
            for loop in loops { loop.stop() }
            throw error
        }
        // Each worker counts through its own Redis connection (on its loop), so a decision never changes threads;
        // connected before the first request comes.
        limitsStore?.start()
        let service = RelayHTTPHandler(
            state: RelayState(configuration: config, secrets: setup.secrets, gateways: gateways), clock: clock,
            limitsStore: limitsStore)
        self.service = service
        var serverConfig = HTTPServerConfiguration(host: config.listen.host, port: config.listen.port)
        serverConfig.threads = config.server.threads
        serverConfig.connectionLimit = config.server.maxConnections
        serverConfig.perAddressConnectionLimit = config.server.maxConnectionsPerAddress
        serverConfig.connectionTimeoutSeconds = config.server.connectionTimeoutSeconds
        // The relay's requests carry a few hundred bytes of headers. Every open connection, idle or
        // not, holds a buffer of the header limit plus 4 KiB: 4 KiB of headers makes that 8 KiB
        // (10,000 idle keep-alive connections: about 80 MB rather than 120 MB).
        serverConfig.maxHeaderBytes = Self.maxHeaderBytes
        do throws(ConfigurationError) {
            serverConfig.tls = try config.tls.map { files throws(ConfigurationError) in
                try FrontCertificate.load(files, now: Int64(clock.unixSeconds))
            }
        } catch {
            for gateway in gateways.values { gateway.shutdown() }
            limitsStore?.shutdown()
            for loop in loops { loop.stop() }
            throw error
        }
        do {
            if config.listen.isSystemd {
                serverConfig.passedSocket = try SocketActivation.passedDescriptor(
                    environment: ProcessInfo.processInfo.environment, processID: getpid())
            }
            server = try HTTPServer(configuration: serverConfig, handler: service, loops: loops)
        } catch {
            for gateway in gateways.values { gateway.shutdown() }
            limitsStore?.shutdown()
            for loop in loops { loop.stop() }
            throw ConfigurationError(.invalid, "listen", "cannot serve there: " + error.reason)
        }
        if let listen = config.metricsListen {
            var metricsConfig = HTTPServerConfiguration(host: listen.host, port: listen.port)
            metricsConfig.threads = 1
            metricsConfig.connectionLimit = 64
            do {
                metricsServer = try HTTPServer(
                    configuration: metricsConfig,
                    handler: MetricsEndpoint(
                        service: service, extraCounters: { Self.gatewayCounters(service) },
                        extraText: { [server] in Self.connectionMetrics(server) + Self.tlsMetrics(server) }))
            } catch {
                server.stop()
                for gateway in gateways.values { gateway.shutdown() }
                limitsStore?.shutdown()
                for loop in loops { loop.stop() }
                throw ConfigurationError(.invalid, "metrics_listen", "cannot serve there: " + error.reason)
            }
        } else {
            metricsServer = nil
        }
        // Every 2 s on the first worker's loop (a dispatch timer started a thread of its own once serving).
        // Weak: the handler (and with it the limiters and their windows) must be freed with the relay.
        let first = loops[0]
        maintenance = try? first.performAndWait { [weak service] in
            let again = Rearm()
            let timer = LoopTimer(on: first) { [weak service] in
                service?.maintain()
                again.timer?.schedule(afterMilliseconds: Self.maintenanceMilliseconds)
            }
            again.timer = timer
            timer.schedule(afterMilliseconds: Self.maintenanceMilliseconds)
            return LoopBound(timer, on: first)
        }
    }

    /// How often the limiters forget passed windows and failing APNs environments are probed.
    private static let maintenanceMilliseconds: UInt64 = 2_000

    deinit {
        // A relay dropped without `stop()` (a test's): its connections close first, then the loops end.
        server.stop()
        service.limitsStore?.shutdown()
        for loop in loops where !loop.isCurrent { loop.stop() }
    }

    /// One event loop per worker, named as `top -H` shows them.
    private static func workerLoops(_ count: Int) throws(ConfigurationError) -> [EventLoop] {
        var loops: [EventLoop] = []
        for index in 0..<count {
            do {
                // OpenSSL's per-thread state is freed on the loop's thread as it ends (the APNs and Redis clients'
                // TLS runs there).
                loops.append(try EventLoop(name: "duo-http-\(index)", onThreadExit: { OpenSSLThread.stop() }))
            } catch {
                for loop in loops { loop.stop() }
                throw ConfigurationError(.invalid, "server.threads", "cannot start a worker: " + error.reason)
            }
        }
        return loops
    }

    /// What `check` runs of the start-up (all but listening, which it cannot try beside a running relay): the
    /// APNs clients are set up exactly as `serve` sets them up (origins, `apns.ca_file`) for each environment
    /// whose key loaded, then dropped; so is the Redis client. Every problem found, one per key.
    public static func preflight(
        _ configuration: RelayConfiguration, environments: [APNsEnvironment], redisPassword: String?
    ) -> [ConfigurationError] {
        var problems: [ConfigurationError] = []
        do throws(ConfigurationError) {
            if let path = configuration.apns.caFile { try requireReadableFile(path, "apns.ca_file") }
            for environment in environments {
                let transport = APNsGateway.Transport(configuration, environment)
                do {
                    try HTTP2Client.check(transport.clientConfiguration())
                } catch {
                    let problem = Self.problem(error, environment: environment, configuration: configuration)
                    if !problems.contains(problem) { problems.append(problem) }
                }
            }
        } catch {
            problems.append(error)
        }
        do throws(ConfigurationError) {
            // Set up (its TLS roots with `limits_store.ca_file` loaded) and dropped unstarted: `check` never connects.
            _ = try limitsStore(
                configuration, password: redisPassword, sentinelPassword: nil, loops: [])
        } catch {
            problems.append(error)
        }
        return problems
    }

    /// The configuration key at fault when an environment's APNs client cannot be set up, in words.
    private static func problem(
        _ error: HTTP2ClientError, environment: APNsEnvironment, configuration: RelayConfiguration
    ) -> ConfigurationError {
        if error.reason.hasPrefix("origin") {
            return ConfigurationError(.invalid, "apns.\(environment.name)_origin", "must be https://host[:port]")
        }
        return configuration.apns.caFile == nil
            ? ConfigurationError(.invalid, "apns", "the APNs client cannot be set up: " + error.reason)
            : ConfigurationError(.invalid, "apns.ca_file", "cannot be loaded as a PEM CA bundle: " + error.reason)
    }

    /// The Redis limits store, not yet started, when `limits_store.kind` is redis. A problem names the key at fault.
    private static func limitsStore(
        _ configuration: RelayConfiguration, password: String?, sentinelPassword: String?, loops: [EventLoop]
    ) throws(ConfigurationError) -> SharedLimitsStore? {
        let settings = configuration.limitsStore
        guard settings.kind == .redis, settings.url != nil || settings.sentinel != nil else { return nil }
        if let path = settings.caFile {
            try requireReadableFile(path, "limits_store.ca_file")
        }
        do {
            return try SharedLimitsStore(
                settings: settings, password: password, sentinelPassword: sentinelPassword, loops: loops)
        } catch {
            throw settings.caFile == nil
                ? ConfigurationError(.invalid, "limits_store", "the Redis client cannot be set up: " + error.reason)
                : ConfigurationError(
                    .invalid, "limits_store.ca_file", "cannot be loaded as a PEM CA bundle: " + error.reason)
        }
    }

    /// A configured file must exist, be no directory, and be readable.
    private static func requireReadableFile(_ path: String, _ key: String) throws(ConfigurationError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            FileManager.default.isReadableFile(atPath: path)
        else {
            throw ConfigurationError(.unreadable, key, "names a file that cannot be read")
        }
    }

    /// One gateway per configured environment. A problem names the configuration key at fault, in words.
    private static func gateways(
        _ setup: RelaySetup, clock: any RelayClock, loops: [EventLoop],
        keeping old: [APNsEnvironment: APNsGateway] = [:]
    ) throws(ConfigurationError) -> [APNsEnvironment: APNsGateway] {
        let config = setup.configuration
        if let path = config.apns.caFile {
            try requireReadableFile(path, "apns.ca_file")
        }
        var gateways: [APNsEnvironment: APNsGateway] = [:]
        for environment in setup.secrets.environments {
            let credentials = setup.secrets.credentials(environment)!
            // A new APNs key gets new connections: APNs refuses a connection's token changing more often
            // than every 20 minutes.
            let transport = APNsGateway.Transport(
                config, environment, proxyCredentials: setup.secrets.apnsProxyAuthorization)
            if let gateway = old[environment], gateway.transport == transport,
                gateway.token.signs(like: credentials)
            {
                gateway.update(configuration: config)
                gateways[environment] = gateway
                continue
            }
            do {
                gateways[environment] = try APNsGateway(
                    environment: environment, configuration: config, credentials: credentials, clock: clock,
                    loops: loops, problems: old[environment]?.problems,
                    proxyCredentials: setup.secrets.apnsProxyAuthorization,
                    keyLocation: setup.secrets.apnsKeys[environment]?.uri?.description)
            } catch {
                for (environment, gateway) in gateways where old[environment] !== gateway { gateway.shutdown() }
                if let error = error as? ConfigurationError { throw error }
                throw Self.problem(
                    error as? HTTP2ClientError
                        ?? HTTP2ClientError(
                            .invalidConfiguration, "it could not be created", mayHaveBeenProcessed: false),
                    environment: environment, configuration: config)
            }
        }
        return gateways
    }

    /// Once per process: glibc gives threads their own malloc arenas (up to eight per core), and
    /// memory freed into one is not reused by another. Four arenas keep that bounded, where a single
    /// arena's lock would make the threads wait on each other. The `duo-relay` binary links jemalloc,
    /// which replaces glibc's malloc and ignores this; it applies where the relay runs on glibc's
    /// malloc (the test processes, sanitizer builds).
    private static let mallocLimited: Bool = {
        mallopt(M_ARENA_MAX, 4) == 1
    }()

    /// The largest request line and headers answered normally (larger: 431 `too_large`).
    static let maxHeaderBytes = 4096

    /// The limiters that count in the shared store (none without one): a test checks that they are freed.
    var sharedLimiters: [SharedRateLimiter] { service.sharedLimiters }

    /// The certificate new connections are served (`tls`), nil without TLS.
    public var tlsCertificate: CertificateSummary? { server.tlsCertificate }

    /// The start-up summary's `tls:` line: the served certificate's subject, expiry and SHA-256 fingerprint, or that
    /// the relay serves plain HTTP.
    public var tlsSummary: String {
        tlsCertificate.map { "tls: certificate " + $0.description }
            ?? "tls: none (plain HTTP, for a front; tls not set)"
    }

    /// The bound port (useful when the configuration asked for port 0).
    public var port: UInt16 { server.port }
    /// The metrics listener's bound port, if one is configured.
    public var metricsPort: UInt16? { metricsServer?.port }

    /// Serves until SIGTERM or SIGINT, then stops gracefully; SIGHUP reloads. Blocks until stopped.
    ///
    /// The stop runs on the calling thread, and the signal handlers never hold the relay: when this returns, the
    /// caller's reference is the last, so the relay is freed on the caller's thread before the process exits
    /// (freed on a dispatch thread during `exit`, it would be half torn down when LeakSanitizer looks).
    public func runUntilSignalled() {
        runUntilSignalled(stoppingOn: [SIGTERM, SIGINT], reloadingOn: SIGHUP)
    }

    /// Catches SIGHUP from now until ``runUntilSignalled()`` takes over: call it first thing in a process that will
    /// serve. A reload asked for while the relay starts (systemd's `systemctl restart` then `systemctl reload`: with
    /// `Type=exec` the reload's SIGHUP comes as soon as the process runs) would otherwise end the process silently
    /// (SIGHUP's default action) or be lost; caught here, it is carried out once the relay serves.
    public static func catchEarlyReloads() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        earlyReloadPipe.store(UInt64(UInt32(ends[0])) << 32 | UInt64(UInt32(ends[1])), ordering: .releasing)
        signal(SIGHUP, earlyReloadHandler)
    }

    /// The read end of ``catchEarlyReloads()``'s pipe, if it made one.
    private static var earlyReloadReadEnd: Int32? {
        let ends = earlyReloadPipe.load(ordering: .acquiring)
        return ends == 0 ? nil : Int32(truncatingIfNeeded: ends >> 32)
    }

    /// ``runUntilSignalled()`` with its signals given (a test uses signals no test runner sends).
    func runUntilSignalled(stoppingOn stopSignals: [Int32], reloadingOn reloadSignal: Int32) {
        let earlyReloads = reloadSignal == SIGHUP ? Self.earlyReloadReadEnd : nil
        var sources: [any DispatchSourceProtocol] = []
        // A reload asked for while the relay was starting, or until the signal source below takes SIGHUP over (it
        // installs its own handler a moment after `resume()`), is a byte in `catchEarlyReloads`'s pipe: read, it is
        // carried out now that it can be. Both ways end in one reload; none is dropped in between.
        if let earlyReloads {
            let source = DispatchSource.makeReadSource(fileDescriptor: earlyReloads, queue: .global())
            source.setEventHandler { [weak self] in
                var bytes = [UInt8](repeating: 0, count: 64)
                var asked = false
                while read(earlyReloads, &bytes, bytes.count) > 0 { asked = true }
                if asked { self?.reloadFromSource() }
            }
            source.resume()
            sources.append(source)
        }
        for number in stopSignals + [reloadSignal] {
            // Not for a SIGHUP that `catchEarlyReloads` catches: ignoring it until the source below takes it over
            // would drop one that comes in between.
            if !(number == SIGHUP && earlyReloads != nil) { signal(number, SIG_IGN) }
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            if number == reloadSignal {
                source.setEventHandler { [weak self] in self?.reloadFromSource() }
            } else {
                source.setEventHandler { [stopRequested] in stopRequested.signal() }
            }
            source.resume()
            sources.append(source)
        }
        stopRequested.wait()
        sources.forEach { $0.cancel() }
        stop()
    }

    /// Graceful stop: stop accepting, let pushes finish within the grace period, answer the rest (502 for a push
    /// APNs may have, 503 for one never sent). Safe to call more than once and from any thread; returns when done.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else {
            // Another caller is stopping the relay: wait for it to finish, and pass the word on.
            stopped.wait()
            stopped.signal()
            return
        }
        stopRequested.signal()
        if let maintenance { try? maintenance.loop.performAndWait { maintenance.value.close() } }
        service.beginDraining()
        server.quiesce()
        // Every worker closes its idle connections at once and each other one once its answer is written; the last
        // close wakes this thread. When the grace period ends first, the APNs clients stop: a push already written to
        // APNs is answered 502 `apns` (APNs may have it), one never written 503 `overloaded`; what still waits for
        // something else (the limits store) is answered 503 `overloaded`. Those answers are written before the
        // connections close.
        let grace = DispatchTime.now() + .seconds(service.current.configuration.server.shutdownGraceSeconds)
        if !server.waitUntilDrained(until: grace) {
            for gateway in service.current.gateways.values { gateway.shutdown() }
            for gateway in retiredGateways.withLock({ $0 }) { gateway.shutdown() }
            server.answerWaiting { [service] route in service.abandoned(route: route) }
            _ = server.waitUntilDrained(until: .now() + .seconds(1))
        }
        server.stop()
        metricsServer?.stop()
        for gateway in service.current.gateways.values { gateway.shutdown() }
        service.limitsStore?.shutdown()
        for loop in loops { loop.stop() }
        stopped.signal()
    }

    private func reloadFromSource() {
        guard let reloadSource else { return }
        switch reloadSource() {
        case .success(let setup):
            reload(setup)
        case .failure(let error):
            Log.line(
                "reload refused, keeping the running configuration: \(error)", level: .error, event: "reload_refused")
        }
    }

    /// Switches to a new setup without dropping connections or pushes in flight: gateways whose
    /// transport is unchanged are kept (with the new key), others are replaced, and the old ones
    /// are shut down once their pushes have had time to finish.
    public func reload(_ setup: RelaySetup) {
        let old = service.current
        let config = setup.configuration
        // Said in the `reloaded:` line itself, by configuration key: a separate line is easy to miss.
        let decision = ReloadDecision(running: old.configuration, new: config)
        // An environment's key and key id change together or not at all: half a change is refused whole.
        for (environment, gateway) in old.gateways.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard let new = setup.secrets.credentials(environment),
                let problem = APNsKeyChange.problem(running: gateway.token.signer, new: new, environment: environment)
            else { continue }
            Log.line(
                "reload refused, keeping the running configuration and keys: \(problem)", level: .error,
                event: "reload_refused")
            return
        }
        // The pair is read again, whether its files changed or not (a renewal writes over them): refused whole
        // when it does not load, the running pair serving on.
        var tls: TLSServerContext?
        if let files = decision.configuration.tls {
            do throws(ConfigurationError) {
                tls = try FrontCertificate.load(files, now: Int64(clock.unixSeconds))
            } catch {
                Log.line("duo-relay: reload refused, keeping the running configuration and certificate: \(error)")
                return
            }
        }
        let gateways: [APNsEnvironment: APNsGateway]
        var retired: [APNsGateway] = []
        do {
            gateways = try Self.gateways(setup, clock: clock, loops: loops, keeping: old.gateways)
        } catch {
            Log.line(
                "reload refused, keeping the running configuration: \(error)", level: .error, event: "reload_refused")
            return
        }
        for (environment, gateway) in old.gateways where gateways[environment] !== gateway {
            retired.append(gateway)
        }
        service.replace(RelayState(configuration: decision.configuration, secrets: setup.secrets, gateways: gateways))
        if let tls { server.replaceTLSContext(tls) }
        if !retired.isEmpty {
            let retired = retired
            retiredGateways.withLock { $0 += retired }
            let delay = Double(old.configuration.apns.timeoutMilliseconds) / 1000 + 1
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in
                for gateway in retired { gateway.shutdown() }
                self?.retiredGateways.withLock { $0.removeAll { gateway in retired.contains { $0 === gateway } } }
            }
        }
        Log.use(config.logFormat)
        Log.line(
            "reloaded: relay keys " + setup.secrets.relayKeys.ids.map(String.init).joined(separator: ", ")
                + "; grants sealed with key \(config.grantKeyID); environments "
                + setup.secrets.environments.map { environment in
                    environment.name + " (key id " + (setup.secrets.credentials(environment)?.keyID ?? "") + ")"
                }.joined(separator: ", ")
                + (tls.map { "; tls: certificate " + $0.leaf.description } ?? "")
                + (decision.needRestart.isEmpty
                    ? "" : "; not applied until a restart: " + decision.needRestart.joined(separator: ", ")),
            event: "reloaded")
    }

    /// Requests answered by outcome, for the end-of-run line.
    public var counts: [String: Int] { service.metrics.outcomes }

    /// The client connections: counted against the caps now, and refused at a cap (a client under its cap never is).
    private static func connectionMetrics(_ server: HTTPServer) -> String {
        "# HELP duo_relay_connections_open Client connections counted against the connection caps now.\n"
            + "# TYPE duo_relay_connections_open gauge\n"
            + "duo_relay_connections_open \(server.connectionsOpen)\n"
            + "# HELP duo_relay_connections_refused_total Client connections refused at a connection cap (answered 503 "
            + "overloaded, or closed when every slot for connections over a cap was taken).\n"
            + "# TYPE duo_relay_connections_refused_total counter\n"
            + "duo_relay_connections_refused_total \(server.connectionsRefused)\n"
    }

    /// The TLS front's metrics (none without `tls`): the served certificate's expiry and the failed handshakes by
    /// kind.
    private static func tlsMetrics(_ server: HTTPServer) -> String {
        guard let leaf = server.tlsCertificate else { return "" }
        var out =
            "# HELP duo_relay_tls_certificate_expiry_timestamp_seconds The served certificate's notAfter, in Unix time.\n"
            + "# TYPE duo_relay_tls_certificate_expiry_timestamp_seconds gauge\n"
            + "duo_relay_tls_certificate_expiry_timestamp_seconds \(leaf.notAfter)\n"
            + "# HELP duo_relay_tls_handshake_failures_total TLS handshakes that failed, by kind (protocol, alpn, "
            + "timeout, other).\n# TYPE duo_relay_tls_handshake_failures_total counter\n"
        for (kind, count) in server.tlsHandshakeFailures {
            out += #"duo_relay_tls_handshake_failures_total{kind="\#(kind)"} "# + "\(count)\n"
        }
        return out
    }

    private static func gatewayCounters(_ service: RelayHTTPHandler) -> [CounterSample] {
        var out: [CounterSample] = []
        for (environment, gateway) in service.current.gateways.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let labels = #"environment="\#(environment.name)""#
            let stats = gateway.statistics
            // Names say what they count: every connect is an attempt (failed ones too), and a connection is
            // counted as failed when a fault retires it (GOAWAY, reset, deadline, failed connect or handshake).
            out.append(
                CounterSample(
                    name: "duo_relay_provider_tokens_signed_total",
                    help: "Provider tokens signed, the first one included.", labels: labels,
                    value: gateway.token.refreshes))
            out.append(
                CounterSample(
                    name: "duo_relay_apns_connection_attempts_total",
                    help: "Connections to APNs started (TCP connect begun), failed ones included.", labels: labels,
                    value: stats.connectionsOpened))
            out.append(
                CounterSample(
                    name: "duo_relay_apns_connections_failed_total",
                    help: "Connections to APNs retired by a fault (GOAWAY, reset, deadline, failed connect or TLS).",
                    labels: labels, value: stats.connectionsReplaced))
            if gateway.transport.proxy != nil {
                for (kind, count) in gateway.problems.tunnelFailureCounts {
                    out.append(
                        CounterSample(
                            name: "duo_relay_apns_proxy_tunnel_failures_total",
                            help: "Connections to APNs for which the egress proxy gave no tunnel, by how "
                                + "(unreachable, refused, malformed, timeout, closed).",
                            labels: labels + #",kind="\#(kind)""#, value: count))
                }
            }
        }
        return out
    }
}

/// The maintenance timer's way to schedule itself again (weakly: the open timer holds its handler).
private final class Rearm {
    weak var timer: LoopTimer?
}

/// ``Relay/catchEarlyReloads()``'s pipe: its read end in the high 32 bits, its write end in the low ones; 0 until
/// made. Both ends stay open for the process's life (a reload may come at any time).
private let earlyReloadPipe = Atomic<UInt64>(0)
/// ``Relay/catchEarlyReloads()``'s SIGHUP handler: writes a byte to the pipe for the relay to read once it serves
/// (`write` is async-signal-safe; a full pipe already holds a reload, so a failed write loses nothing).
private let earlyReloadHandler: @convention(c) (Int32) -> Void = { _ in
    let ends = earlyReloadPipe.load(ordering: .acquiring)
    guard ends != 0 else { return }
    var byte: UInt8 = 1
    let saved = errno
    _ = write(Int32(truncatingIfNeeded: ends & 0xFFFF_FFFF), &byte, 1)
    errno = saved
}
