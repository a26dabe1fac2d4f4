import Dispatch
import HTTP2Client
import RelayCore
import Synchronization

import class Foundation.FileManager

/// Sends notifications to one APNs environment: the HTTP/2 client, the cached provider token,
/// and what to do with APNs' answer (DESIGN.md, "The APNs request").
final class APNsGateway: Sendable {
    /// Whether this environment has lately been able to deliver, for readiness.
    enum Health: String, Sendable {
        /// Nothing sent yet: the key is loaded, no connection tried.
        case idle
        case ready
        /// The last exchange failed: no connection, a timeout, or APNs rejected the key.
        case failing
    }

    let environment: APNsEnvironment
    let client: HTTP2Client
    let token: ProviderToken
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

        init(_ configuration: RelayConfiguration, _ environment: APNsEnvironment) {
            origin = configuration.apns.origin(environment)
            caFile = configuration.apns.caFile
            caContents = caFile.flatMap { FileManager.default.contents(atPath: $0) }.map { Array($0) }
            maxConnections = configuration.apns.maxConnections
        }

        /// The APNs client's configuration for this transport.
        func clientConfiguration(onEvent: (@Sendable (HTTP2ClientEvent) -> Void)? = nil) -> HTTP2ClientConfiguration {
            // APNs allows a new connection one stream until it has seen a valid token (not 403); idle
            // connections are checked with PING every 60 s (the client's defaults, DESIGN.md "Lifecycle").
            HTTP2ClientConfiguration(
                origin: origin, caFile: caFile, maxConnections: maxConnections,
                provesConnection: APNsAnswer.provesToken(status:), onEvent: onEvent)
        }
    }
    private let clock: any RelayClock
    /// What the operator is told about this environment's connections.
    let problems: APNsProblemReporter
    private let currentHealth = Mutex(Health.idle)
    private let lastProbe = Mutex<UInt64>(0)
    private let topic: String
    /// What the relay asks a channel to wait after APNs' 429 (APNs gives no Retry-After).
    static let apnsRetryAfter = 30

    /// - Parameter problems: the reporter of the gateway this one replaces (a reload), so that a problem it
    ///   reported (an untrusted certificate) is said to be resolved once this gateway's connections work.
    init(
        environment: APNsEnvironment, configuration: RelayConfiguration, credentials: ProviderCredentials,
        clock: any RelayClock, problems: APNsProblemReporter? = nil
    ) throws {
        self.environment = environment
        self.clock = clock
        topic = configuration.apns.topic
        timeoutNanoseconds = Atomic(UInt64(configuration.apns.timeoutMilliseconds) * 1_000_000)
        token = ProviderToken(credentials: credentials, clock: clock)
        transport = Transport(configuration, environment)
        let problems = problems ?? APNsProblemReporter(environment: environment.description, clock: clock)
        self.problems = problems
        client = try HTTP2Client(configuration: transport.clientConfiguration(onEvent: { problems.record($0) }))
    }

    /// Takes a new configuration without touching connections (transport and key are unchanged).
    func update(configuration: RelayConfiguration) {
        timeoutNanoseconds.store(UInt64(configuration.apns.timeoutMilliseconds) * 1_000_000, ordering: .relaxed)
    }

    var health: Health { currentHealth.withLock { $0 } }

    /// Sends one notification; `completion` gets the APNs id or the error to answer with.
    func send(
        _ notification: Notification, metrics: Metrics,
        completion: @escaping @Sendable (Result<String?, RelayError>) -> Void
    ) {
        let deadline = clock.uptimeNanoseconds + timeoutNanoseconds.load(ordering: .relaxed)
        send(notification, deadline: deadline, mayRetry: true, metrics: metrics, completion: completion)
    }

    private func send(
        _ notification: Notification, deadline: UInt64, mayRetry: Bool, metrics: Metrics,
        completion: @escaping @Sendable (Result<String?, RelayError>) -> Void
    ) {
        let now = clock.uptimeNanoseconds
        guard now < deadline, let bearer = try? token.token() else {
            completion(.failure(.apns))
            return
        }
        var headers: [(name: String, value: String)] = [("authorization", "bearer " + bearer)]
        headers.append(contentsOf: notification.headers)
        let request = HTTP2Request(
            method: "POST", path: notification.path, headers: headers, body: notification.payload,
            timeout: .nanoseconds(Int64(deadline - now)))
        let sentAt = DispatchTime.now().uptimeNanoseconds
        client.send(request) { [self] result in
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - sentAt) / 1e9
            guard case .success(let response) = result else {
                metrics.apnsAnswer(environment: environment.name, status: 0, reason: nil, seconds: seconds)
                setHealth(.failing)
                completion(.failure(.apns))
                return
            }
            let answer = APNsAnswer(status: response.status, apnsID: response[header: "apns-id"], body: response.body)
            metrics.apnsAnswer(
                environment: environment.name, status: answer.status, reason: answer.reason, seconds: seconds)
            switch answer.action(retryAfter: Self.apnsRetryAfter) {
            case .answer(let outcome):
                setHealth(.ready)
                if answer.provesToken { problems.answered() }
                completion(outcome)
            case .refreshTokenAndRetry:
                guard mayRetry, (try? token.tokenAfterExpiry(of: bearer)) != nil else {
                    setHealth(.failing)
                    completion(.failure(.apns))
                    return
                }
                send(notification, deadline: deadline, mayRetry: false, metrics: metrics, completion: completion)
            case .rejectedKey:
                setHealth(.failing)
                complainAboutKey()
                completion(.failure(.apns))
            }
        }
    }

    /// While failing, asks APNs every few seconds whether this environment works again, so readiness
    /// recovers without traffic (an instance out of rotation gets none). The probe names a device
    /// token that cannot exist: APNs answers 400 BadDeviceToken once connection and key are good,
    /// 403 if the key is refused, and nothing is ever delivered.
    func probeIfFailing() {
        let now = clock.uptimeNanoseconds
        let due = lastProbe.withLock { last -> Bool in
            guard now &- last >= 4_000_000_000 else { return false }
            last = now
            return true
        }
        guard health == .failing, due, let bearer = try? token.token() else { return }
        let request = HTTP2Request(
            method: "POST", path: "/3/device/not-a-device-token",
            headers: [
                ("authorization", "bearer " + bearer), ("apns-topic", topic), ("apns-push-type", "alert"),
                ("apns-priority", "10"),
            ],
            body: Array(#"{"aps":{}}"#.utf8), timeout: .nanoseconds(Int64(timeoutNanoseconds.load(ordering: .relaxed))))
        client.send(request) { [self] result in
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
        client.shutdown()
    }
}
