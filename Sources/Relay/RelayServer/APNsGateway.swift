import EventLoops
import HTTP2Client
import MonotonicTime
import RelayCore
import Synchronization

import class Foundation.FileManager

/// Sends notifications to one APNs environment: the HTTP/2 client, the cached provider token,
/// and what to do with APNs' answer (docs/DESIGN.md, "The APNs request").
final class APNsGateway: Sendable {
    /// Whether this environment has lately been able to deliver: reported by `/readyz` and the metrics.
    enum Health: String, Sendable, CaseIterable {
        /// Nothing sent yet: the key is loaded, no connection tried.
        case idle
        case ready
        /// The last exchange failed: no connection, a timeout, or APNs rejected the key.
        case failing
    }

    let environment: APNsEnvironment
    /// One client per worker, on that worker's loop (docs/DESIGN.md, "Worker model"): a push is sent and answered by
    /// the worker that read it. Without worker loops (handler tests), one client on a loop of its own.
    let clients: [HTTP2Client]
    let token: ProviderToken
    /// The thread that signs this environment's provider tokens, off the workers' loops.
    let refresher: ProviderTokenRefresher
    private let timeoutNanoseconds: Atomic<UInt64>
    /// What decides whether a new configuration can keep this gateway (and its connections).
    let transport: Transport

    struct Transport: Equatable, Sendable {
        var origin: String
        var caFile: String?
        /// The CA file's bytes when read: a CA replaced in place (same path) is a new transport, so that a reload
        /// trusts it (nil when there is no CA file, or it cannot be read: the client then refuses it).
        var caContents: [UInt8]?
        var maxConnections: Int
        /// The egress proxy, and its `user:password` (`APNS_PROXY_AUTHORIZATION`).
        var proxy: ProxyURL?
        var proxyCredentials: String?

        init(_ configuration: RelayConfiguration, _ environment: APNsEnvironment, proxyCredentials: String? = nil) {
            origin = configuration.apns.origin(environment)
            caFile = configuration.apns.caFile
            caContents = caFile.flatMap { FileManager.default.contents(atPath: $0) }.map { Array($0) }
            maxConnections = configuration.apns.maxConnections
            proxy = configuration.apns.proxy
            self.proxyCredentials = proxy == nil ? nil : proxyCredentials
        }

        /// The APNs client's configuration for this transport, for one of `workers` clients: `apns.max_connections`
        /// is the environment's cap for the process, shared evenly among the workers' clients, at least one each
        /// (a worker opens its connections only once it has a push to send).
        func clientConfiguration(
            workers: Int = 1, onEvent: (@Sendable (HTTP2ClientEvent) -> Void)? = nil
        ) -> HTTP2ClientConfiguration {
            // APNs allows a new connection one stream until it has seen a valid token (not 403); a connection that
            // refuses the token in force as too many updates is replaced; idle connections are checked with PING
            // every 60 s (the client's defaults, docs/DESIGN.md "Lifecycle").
            HTTP2ClientConfiguration(
                origin: origin, caFile: caFile, maxConnections: Self.share(of: maxConnections, workers: workers),
                provesConnection: APNsAnswer.provesToken(status:),
                retiresConnection: { APNsAnswer.retiresConnection(status: $0.status, body: $0.body) },
                proxy: proxy.map {
                    HTTP2ClientConfiguration.Proxy(host: $0.host, port: $0.port, credentials: proxyCredentials)
                },
                onEvent: onEvent)
        }

        /// One worker's share of the process's connection cap: the cap divided evenly, at least one.
        static func share(of cap: Int, workers: Int) -> Int {
            max(1, cap / max(1, workers))
        }
    }
    private let clock: any RelayClock
    /// What the operator is told about this environment's connections.
    let problems: APNsProblemReporter
    private let currentHealth = Mutex(Health.idle)
    private let lastProbe = Mutex<Instant>(0)
    private let topic: String
    /// What the relay asks a channel to wait after APNs' 429 (APNs gives no Retry-After).
    static let apnsRetryAfter = 30

    /// - Parameter problems: the reporter of the gateway this one replaces (a reload), so that a problem it
    ///   reported (an untrusted certificate) is said to be resolved once this gateway's connections work.
    ///   - loops: the workers' event loops, one client each; empty: one client on a loop of its own.
    ///   - keyLocation: where the key is held when it is in a token (its URI), for the lines about it.
    init(
        environment: APNsEnvironment, configuration: RelayConfiguration, credentials: ProviderCredentials,
        clock: any RelayClock, loops: [EventLoop] = [], problems: APNsProblemReporter? = nil,
        proxyCredentials: String? = nil, keyLocation: String? = nil
    ) throws {
        self.environment = environment
        self.clock = clock
        topic = configuration.apns.topic
        timeoutNanoseconds = Atomic(UInt64(configuration.apns.timeoutMilliseconds) * 1_000_000)
        token = ProviderToken(credentials: credentials, clock: clock)
        transport = Transport(configuration, environment, proxyCredentials: proxyCredentials)
        let problems = problems ?? APNsProblemReporter(environment: environment.description, clock: clock)
        self.problems = problems
        refresher = ProviderTokenRefresher(
            token: token, clock: clock, problems: problems,
            keyDescription: "key id \(credentials.keyID)" + (keyLocation.map { ", in the token at \($0)" } ?? ""),
            name: "duo-sign-\(environment.name)")
        // The first token is signed before the gateway serves: the first push finds it ready.
        if case .failed(let error, _) = refresher.start() {
            refresher.stop()
            throw ConfigurationError(
                .invalid, "APNS_KEY_" + environment.variableSuffix,
                "\(environment.name): the key" + (keyLocation.map { " \($0)" } ?? "")
                    + " cannot sign a provider token: \(error.reason)")
        }
        // Every worker's client reports to the one problem log of the environment: a problem is said once, not
        // once per worker.
        let onEvent: @Sendable (HTTP2ClientEvent) -> Void = { problems.record($0) }
        if loops.isEmpty {
            do {
                clients = [try HTTP2Client(configuration: transport.clientConfiguration(onEvent: onEvent))]
            } catch {
                refresher.stop()
                throw error
            }
        } else {
            let configuration = transport.clientConfiguration(workers: loops.count, onEvent: onEvent)
            var made: [HTTP2Client] = []
            do {
                for loop in loops { made.append(try HTTP2Client(configuration: configuration, loop: loop)) }
            } catch {
                for client in made { client.shutdown() }
                refresher.stop()
                throw error
            }
            clients = made
        }
    }

    deinit {
        refresher.stop()
    }

    /// The client of the worker that runs the push (any client's `send` also works from another thread, handing
    /// the request to its loop: requests from outside the workers go to the first).
    func client(forWorker worker: Int) -> HTTP2Client {
        clients.indices.contains(worker) ? clients[worker] : clients[0]
    }

    /// The counters of every worker's client, added up.
    var statistics: HTTP2ClientStatistics {
        clients.reduce(into: HTTP2ClientStatistics()) { sum, client in
            let one = client.statistics
            sum.connectionsOpened += one.connectionsOpened
            sum.connectionsReplaced += one.connectionsReplaced
            sum.connectionsOpen += one.connectionsOpen
            sum.requestsInFlight += one.requestsInFlight
            sum.retries += one.retries
        }
    }

    /// Takes a new configuration without touching connections (transport and key are unchanged).
    func update(configuration: RelayConfiguration) {
        timeoutNanoseconds.store(UInt64(configuration.apns.timeoutMilliseconds) * 1_000_000, ordering: .relaxed)
    }

    var health: Health { currentHealth.withLock { $0 } }

    /// Sends one notification with the client of `worker` (``HTTPRequestHead/worker``); `completion` gets the APNs id
    /// or the error to answer with, on that worker's loop when called there.
    func send(
        _ notification: Notification, worker: Int, metrics: Metrics,
        completion: @escaping @Sendable (Result<String?, RelayError>) -> Void
    ) {
        let deadline = clock.monotonicNow + timeoutNanoseconds.load(ordering: .relaxed)
        send(
            notification, client: client(forWorker: worker), worker: worker, deadline: deadline, mayRetry: true,
            metrics: metrics, completion: completion)
    }

    private func send(
        _ notification: Notification, client: HTTP2Client, worker: Int, deadline: Instant, mayRetry: Bool,
        metrics: Metrics, completion: @escaping @Sendable (Result<String?, RelayError>) -> Void
    ) {
        let now = clock.monotonicNow
        // The token in force, never signed here: the signing thread keeps one ready (none while the key has not
        // been able to sign for longer than a token is valid: APNs would refuse it).
        guard now < deadline, let (bearer, authorization) = token.authorization(now: now) else {
            completion(.failure(.apnsNotReached))
            return
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(1 + notification.headers.count)
        headers.append(("authorization", authorization))
        headers.append(contentsOf: notification.headers)
        let request = HTTP2Request(
            method: "POST", path: notification.path, headers: headers, body: notification.payload,
            timeout: .nanoseconds(Int64(deadline - now)))
        // The latency is real time on the loop's clock (the injected clock decides deadlines and may stand still).
        let sentAt = EventLoop.monotonicNow()
        client.send(request) { [self] result in
            let seconds = Double(EventLoop.monotonicNow() - sentAt) / 1e9
            let response: HTTP2Response
            switch result {
            case .success(let answered):
                response = answered
            case .failure(let error) where error.code == .shutdown:
                // The relay stops (its grace has ended) or retired this gateway: not APNs' fault. A push never
                // written to APNs was certainly not delivered (503 `overloaded`: send it again); one that was
                // may have been (502 `apns`).
                completion(
                    .failure(error.mayHaveBeenProcessed ? .apnsNoAnswer : RelayError(.overloaded, retryAfter: 1)))
                return
            case .failure(let error):
                metrics.apnsAnswer(
                    environment: environment.name, status: 0, reason: nil, seconds: seconds, worker: worker)
                setHealth(.failing)
                // Written to APNs (it may have it) or not: the channel is told which.
                completion(.failure(error.mayHaveBeenProcessed ? .apnsNoAnswer : .apnsNotReached))
                return
            }
            let answer = APNsAnswer(status: response.status, apnsID: response[header: "apns-id"], body: response.body)
            metrics.apnsAnswer(
                environment: environment.name, status: answer.status, reason: answer.reason, seconds: seconds,
                worker: worker)
            switch answer.action(retryAfter: Self.apnsRetryAfter) {
            case .answer(let outcome):
                setHealth(.ready)
                if answer.provesToken { problems.answered() }
                completion(outcome)
            case .refreshTokenAndRetry:
                guard mayRetry else {
                    setHealth(.failing)
                    completion(.failure(.apnsRefused(reason: answer.reason)))
                    return
                }
                // The retry goes on the worker's loop once a newer token is in force: at once when another push's
                // answer already replaced it, or when the signing thread has signed one. The answer is given on that
                // loop too, whichever thread tells (the signing thread, when no token could be signed).
                let retry: @Sendable (String?) -> Void = { [self] newer in
                    let onLoop = client.loop.execute { [self] in
                        guard newer != nil else {
                            setHealth(.failing)
                            completion(.failure(.apns))
                            return
                        }
                        send(
                            notification, client: client, worker: worker, deadline: deadline, mayRetry: false,
                            metrics: metrics, completion: completion)
                    }
                    // The loop has stopped (the relay stops): answered here, never left waiting.
                    if !onLoop { completion(.failure(.apns)) }
                }
                switch token.afterExpiry(of: bearer, whenSigned: retry) {
                case .retry(let newer): retry(newer)
                case .signing: break
                case .refused: retry(nil)
                }
            case .rejectedKey:
                setHealth(.failing)
                complainAboutKey()
                completion(.failure(.apnsRefused(reason: answer.reason)))
            }
        }
    }

    /// While failing, asks APNs every few seconds whether this environment works again, so that its reported
    /// state (`/readyz`'s body, the metrics, the alert on them) recovers without traffic. The probe names a device
    /// token that cannot exist: APNs answers 400 BadDeviceToken once connection and key are good,
    /// 403 if the key is refused, and nothing is ever delivered.
    func probeIfFailing() {
        let now = clock.monotonicNow
        let due = lastProbe.withLock { last -> Bool in
            guard now - last >= 4_000_000_000 else { return false }
            last = now
            return true
        }
        guard health == .failing, due, let bearer = token.token() else { return }
        let request = HTTP2Request(
            method: "POST", path: "/3/device/not-a-device-token",
            headers: [
                ("authorization", "bearer " + bearer), ("apns-topic", topic), ("apns-push-type", "alert"),
                ("apns-priority", "10"),
            ],
            body: Array(#"{"aps":{}}"#.utf8), timeout: .nanoseconds(Int64(timeoutNanoseconds.load(ordering: .relaxed))))
        clients[0].send(request) { [self] result in
            guard case .success(let response) = result else { return }
            if response.status != 403 && response.status < 500 { setHealth(.ready) }
        }
    }

    private func setHealth(_ health: Health) {
        currentHealth.withLock { if $0 != health { $0 = health } }
    }

    /// One line when APNs starts refusing this environment's key (and one when it accepts it again).
    private func complainAboutKey() {
        let suffix = environment.variableSuffix
        let detail = "InvalidProviderToken: check APNS_KEY_\(suffix), APNS_KEY_ID_\(suffix) and APNS_TEAM_ID"
        problems.providerTokenRejected(detail)
    }

    func shutdown() {
        refresher.stop()
        for client in clients { client.shutdown() }
    }
}
