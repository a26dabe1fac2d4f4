import HTTPServer
import RelayCore
import RelayCrypto
import Synchronization

/// The relay's HTTP surface (DESIGN.md, "HTTP API"): routing, the per-address limit, and the
/// grant and push endpoints. Every answer it gives is built by `answer(_:)` from a `RelayError`
/// or a success body; nothing about a request is ever logged.
final class RelayService: HTTPHandler {
    private let state: Mutex<RelayState>
    private let ipLimiter: any RateLimiter
    private let phoneLimiter: any RateLimiter
    private let clock: any RelayClock
    /// Per-process key for hashing client addresses.
    private let addressSecret = SecureRandom.bytes(count: 32)
    private let pushesInFlight = Atomic<Int>(0)
    let pending = PendingAnswers()
    let counters = RelayCounters()

    init(state: RelayState, clock: any RelayClock) {
        self.state = Mutex(state)
        self.clock = clock
        let config = state.configuration
        ipLimiter = InMemoryRateLimiter(policy: config.ipLimit)
        phoneLimiter = InMemoryRateLimiter(policy: config.pushLimit)
    }

    var current: RelayState { state.withLock { $0 } }

    /// Pushes accepted and not yet answered.
    var inFlight: Int { pushesInFlight.load(ordering: .relaxed) }

    // MARK: HTTPHandler

    func head(_ head: HTTPRequestHead) -> HeadDecision {
        let path = head.path
        if path == "/healthz" {
            guard head.method == "GET" || head.method == "HEAD" else { return .respond(answer(.methodNotAllowed)) }
            return .respond(HTTPResponse.json(200, #"{"status":"ok"}"#))
        }
        guard path.hasPrefix("/v1/") else { return .respond(answer(.notFound)) }
        let config = current.configuration
        if case .limited(let retryAfter) = ipLimiter.admit(addressKey(head, config), now: clock.uptimeNanoseconds) {
            counters.count(.addressLimited)
            return .respond(answer(RelayError(.rateLimited, retryAfter: retryAfter)))
        }
        let limit: Int
        switch path {
        case "/v1/grant": limit = GrantRequest.bodyLimit
        case "/v1/push": limit = PushRequest.bodyLimit
        default: return .respond(answer(.notFound))
        }
        guard head.method == "POST" else { return .respond(answer(.methodNotAllowed)) }
        return .readBody(limit: limit)
    }

    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse {
        answer(.tooLarge)
    }

    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder) {
        switch head.path {
        case "/v1/grant": responder.respond(grant(body))
        case "/v1/push": push(body, responder: responder)
        default: responder.respond(answer(.notFound))
        }
    }

    // MARK: Endpoints

    private func grant(_ body: [UInt8]) -> HTTPResponse {
        let state = current
        do throws(RelayError) {
            let request = try GrantRequest.parse(body)
            guard state.gateways[request.environment] != nil else { throw .environmentUnavailable }
            let now = clock.unixSeconds
            let grant = Grant(environment: request.environment, issuedAt: now, token: request.token)
            guard
                let text = try? GrantCodec.seal(
                    grant, keyID: state.configuration.grantKeyID, keys: state.secrets.relayKeys)
            else { throw .badRequest }
            counters.count(.grantIssued)
            return HTTPResponse.json(
                200, GrantResponse(grant: text, expiresAt: now + state.configuration.grantLifetimeSeconds).json)
        } catch {
            return answer(error)
        }
    }

    private func push(_ body: [UInt8], responder: HTTPResponder) {
        let state = current
        let admitted = pushesInFlight.add(1, ordering: .relaxed).newValue
        let ticket = pending.add(responder)
        let finish: @Sendable (HTTPResponse) -> Void = { [pushesInFlight, pending] response in
            pushesInFlight.subtract(1, ordering: .relaxed)
            if pending.claim(ticket) { responder.respond(response) }
        }
        guard admitted <= state.configuration.server.maxPushesInFlight else {
            counters.count(.overloaded)
            finish(answer(RelayError(.overloaded, retryAfter: 1)))
            return
        }
        let request: PushRequest
        let grant: Grant
        do throws(RelayError) {
            request = try PushRequest.parse(body)
            do throws(GrantError) {
                grant = try GrantCodec.open(
                    request.grant, keys: state.secrets.relayKeys, now: clock.unixSeconds,
                    lifetime: state.configuration.grantLifetimeSeconds)
            } catch {
                throw error.relayError
            }
            if case .limited(let retryAfter) = phoneLimiter.admit(
                .phone(token: grant.token), now: clock.uptimeNanoseconds)
            {
                counters.count(.phoneLimited)
                throw RelayError(.rateLimited, retryAfter: retryAfter)
            }
            // A grant for an environment whose key was removed can no longer deliver.
            guard state.gateways[grant.environment] != nil else { throw .apns }
        } catch {
            finish(answer(error))
            return
        }
        let notification = Notification(
            push: request, token: grant.token, settings: state.configuration.apns.notificationSettings,
            expiresAt: state.configuration.apns.notificationSettings.expiration(now: clock.unixSeconds))
        state.gateways[grant.environment]!.send(notification) { [self] outcome in
            switch outcome {
            case .success(let apnsID):
                counters.count(.pushDelivered)
                let body = apnsID.map { #"{"apns_id":""# + JSONText.escape($0) + #""}"# } ?? "{}"
                finish(HTTPResponse.json(200, body))
            case .failure(let error):
                finish(answer(error))
            }
        }
    }

    /// Answers every push still waiting with 503 `overloaded` (the grace period has ended).
    func abandonPending() {
        for responder in pending.claimAll() {
            responder.respond(answer(RelayError(.overloaded, retryAfter: 1)))
        }
    }

    // MARK: Helpers

    /// The per-address key: the socket peer, or the trusted proxy's header when configured.
    private func addressKey(_ head: HTTPRequestHead, _ config: RelayConfiguration) -> LimiterKey {
        var peer = head.peer
        if let name = config.clientIPHeader, let value = head.headers[name] {
            let last = value.split(separator: ",").last.map { $0.trimmingCharacters(in: " \t") } ?? ""
            if let parsed = SocketPeer.parse(last) { peer = parsed }
        }
        return .address(peer.bytes, secret: addressSecret)
    }

    /// The one place an error becomes an HTTP answer.
    func answer(_ error: RelayError) -> HTTPResponse {
        counters.count(error.code)
        var headers: [(name: String, value: String)] = []
        if let retryAfter = error.retryAfter { headers.append(("retry-after", String(retryAfter))) }
        return HTTPResponse.json(error.status, error.body, headers: headers)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(drop(while: { set.contains($0) }).reversed().drop(while: { set.contains($0) }).reversed())
    }
}

/// Minimal escaping for text the relay puts into its own JSON answers.
enum JSONText {
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
