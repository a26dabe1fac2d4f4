import HTTP1
import HTTPServer
import RelayCore
import RelayCrypto
import Synchronization

/// The relay's HTTP surface (docs/DESIGN.md, "HTTP API"): routing, the per-address limit, and the
/// grant and push endpoints. Every answer is built by `answer(_:_:)` from a `RelayError` or a
/// success body; nothing about a request is ever logged.
final class RelayHTTPHandler: HTTPHandler {
    typealias Endpoint = Route.Endpoint

    private let state: Mutex<RelayState>
    /// In memory or in the shared store: the handler takes the same steps with either.
    private let limits: any RequestLimits
    private let clock: any RelayClock
    /// The key for hashing client addresses (the limits' own: see ``RequestLimits/addressSecret``).
    private let addressSecret: HMACSHA256.Key
    /// The Redis limits store, when `limits_store.kind` is redis.
    let limitsStore: SharedLimitsStore?
    private let pushesInFlight = Atomic<Int>(0)
    /// Set once a stop has begun: the instance no longer takes new connections, so it is not ready.
    private let draining = Atomic<Bool>(false)
    private let sealFailureLogged = Atomic<Bool>(false)
    let metrics = Metrics()

    init(state: RelayState, clock: any RelayClock, limitsStore: SharedLimitsStore? = nil) {
        self.state = Mutex(state)
        self.clock = clock
        limits = state.requestLimits(store: limitsStore, clock: clock)
        addressSecret = limits.addressSecret
        self.limitsStore = limitsStore
    }

    var current: RelayState { state.withLock { $0 } }

    /// The limiters that count in the shared store (none without one).
    var sharedLimiters: [SharedRateLimiter] { limits.sharedLimiters }

    /// Switches to a new state (rotation); requests already past their state lookup finish with the old one.
    func replace(_ new: RelayState) {
        state.withLock { $0 = new }
    }

    /// The relay stops: from now on `/readyz` answers 503 `draining` until the process is gone.
    func beginDraining() {
        draining.store(true, ordering: .relaxed)
    }

    /// Pushes accepted and not yet answered.
    var inFlight: Int { pushesInFlight.load(ordering: .relaxed) }

    /// Periodic upkeep: forgets passed limiter windows, and lets failing APNs environments
    /// check whether they have recovered.
    func maintain() {
        let now = clock.monotonicNow
        limits.sweep(now: now)
        for gateway in current.gateways.values { gateway.probeIfFailing() }
    }

    // MARK: HTTPHandler

    func route(path: String) -> Int { Route.number(of: path) }

    func head(_ head: HTTPRequestHead) -> HeadDecision {
        let route = Route(number: head.route)
        if route.endpoint == .healthz || route.endpoint == .readyz {
            guard route.allows(head.method) else {
                return .respond(answer(.methodNotAllowed, route.endpoint, head.worker))
            }
            return .respond(route.endpoint == .healthz ? healthy(head.worker) : readiness(worker: head.worker))
        }
        guard route.countsAgainstAddress else { return .respond(answer(.notFound, route.endpoint, head.worker)) }
        return limits.head(head, route, self)
    }

    /// What the head of a `/v1/` request gets once the per-address limit has decided.
    func afterAddressLimit(
        _ decision: LimitDecision, _ route: Route, _ method: String, _ worker: Int
    ) -> HeadDecision {
        if let refusal = addressRefusal(decision, route.endpoint, worker) { return .respond(refusal) }
        guard route.endpoint != .other else { return .respond(answer(.notFound, route.endpoint, worker)) }
        guard route.allows(method) else { return .respond(answer(.methodNotAllowed, route.endpoint, worker)) }
        return .readBody(limit: route.bodyLimit)
    }

    /// The answer to a request whose address the limit refused (429, or 503 with `on_failure: refuse`); nil when
    /// admitted.
    private func addressRefusal(_ decision: LimitDecision, _ endpoint: Endpoint, _ worker: Int) -> HTTP1Response? {
        switch decision {
        case .allowed:
            return nil
        case .limited(let retryAfter):
            metrics.limited("address", worker: worker)
            return answer(RelayError(.rateLimited, retryAfter: retryAfter, limit: .address), endpoint, worker)
        case .unavailable(let retryAfter):
            return answer(RelayError(.overloaded, retryAfter: retryAfter), endpoint, worker)
        }
    }

    /// Oversized target or headers (414, 431) or untrustworthy framing (400): under /v1/ these count against
    /// the client's address like every request there (once: a refusal of a body, broken chunks, follows a head the
    /// limits had), and a blocked address the limits decide at once gets its 429.
    func refused(_ head: HTTPRequestHead, refusal: HTTPRefusal) -> HTTP1Response {
        let route = Route(number: head.route)
        if route.countsAgainstAddress,
            let limited = addressRefusal(
                limits.refusedBeforeBody(head, headCounted: refusal.followsHead, self), route.endpoint, head.worker)
        {
            return limited
        }
        var response = answer(RelayError.refusal(refusal.rule, status: refusal.status), route.endpoint, head.worker)
        response.status = refusal.status
        return response
    }

    /// A body over its endpoint's limit (413): its head reached the limits, which count it if they have not yet.
    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTP1Response {
        let route = Route(number: head.route)
        _ = limits.refusedBeforeBody(head, headCounted: true, self)
        return answer(route.tooLarge, route.endpoint, head.worker)
    }

    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder) {
        switch Route(number: head.route).endpoint {
        case .grant:
            limits.decide(ReadRequest(kind: .grant(body: body), state: current, responder: responder), head, self)
        case .push: push(head, body, responder: responder)
        case .healthz, .readyz, .other: responder.respond(answer(.notFound, .other, head.worker))
        }
    }

    /// A read request once its limits have decided: the address first (its refusal whatever the body), then the
    /// body and grant, then the phone (`phone`: asked only for a push whose grant opened and address was admitted).
    func decided(_ request: ReadRequest, worker: Int, address: LimitDecision, phone: LimitDecision?) {
        let responder = request.responder
        switch request.kind {
        case .grant(let body):
            responder.respond(addressRefusal(address, .grant, worker) ?? grant(body, request.state, worker))
        case .push(let opened):
            if let refusal = addressRefusal(address, .push, worker) { return finish(refusal, responder) }
            guard let opened else {
                return finish(answer(RelayError(.overloaded, retryAfter: 1), .push, worker), responder)
            }
            switch opened {
            case .failure(let error): finish(answer(error, .push, worker), responder)
            case .success(let opened):
                metrics.grantOpened(keyID: opened.keyID, worker: worker)
                send(opened, request, worker, phone ?? .unavailable(retryAfter: 1))
            }
        }
    }

    // MARK: Endpoints

    private func healthy(_ worker: Int) -> HTTP1Response {
        metrics.request(endpoint: Endpoint.healthz.rawValue, outcome: "ok", worker: worker)
        return HTTP1Response.json(200, #"{"status":"ok"}"#)
    }

    /// Whether this instance can serve (docs/DESIGN.md, "HTTP API"): it listens, has a configuration in force (at
    /// least one APNs environment with its key) and is not draining, and its limits are not `unavailable`. Each
    /// environment's APNs state is in the body, but does not decide: APNs is shared by every instance, and an outage
    /// must not take them all out of rotation at once.
    func readiness(worker: Int) -> HTTP1Response {
        let state = readinessState()
        let status = state.ready ? "ready" : state.draining ? "draining" : "not_ready"
        let body =
            #"{"status":""# + status + #"","environments":{"#
            + state.environments.map { #""\#($0.0.name)":""# + $0.1.rawValue + #"""# }.joined(separator: ",")
            + #"},"limits":""# + state.limits + #""}"#
        metrics.request(endpoint: Endpoint.readyz.rawValue, outcome: state.ready ? "ok" : "not_ready", worker: worker)
        return HTTP1Response.json(state.ready ? 200 : 503, body)
    }

    /// What `/readyz` answers, without counting a request: also the `duo_relay_ready` gauge, so that
    /// an alert on readiness does not depend on something probing `/readyz`.
    func readinessState() -> Readiness {
        let states = current.gateways.sorted { $0.key.rawValue < $1.key.rawValue }.map { ($0.key, $0.value.health) }
        let limits = limitsStore?.health.rawValue ?? "memory"
        let draining = draining.load(ordering: .relaxed)
        let ready = !states.isEmpty && !draining && limits != "unavailable"
        return Readiness(ready: ready, draining: draining, environments: states, limits: limits)
    }

    /// What decides `/readyz`, and what its body says.
    struct Readiness {
        var ready: Bool
        var draining: Bool
        /// Each configured APNs environment's state: reported, never deciding.
        var environments: [(APNsEnvironment, APNsGateway.Health)]
        var limits: String
    }

    private func grant(_ body: [UInt8], _ state: RelayState, _ worker: Int) -> HTTP1Response {
        do throws(RelayError) {
            let request = try GrantRequest.parse(body)
            guard state.gateways[request.environment] != nil else { throw .environmentUnavailable }
            let now = clock.unixSeconds
            let grant = Grant(environment: request.environment, issuedAt: now, token: request.token)
            guard
                let text = try? GrantCodec.seal(
                    grant, keyID: state.configuration.grantKeyID, keys: state.secrets.relayKeys)
            else {
                // The relay's fault, not the phone's: said once per process, never with anything of the request.
                if !sealFailureLogged.exchange(true, ordering: .relaxed) {
                    Log.line(
                        "a grant could not be sealed; answered 500 internal_error (logged once)", level: .error,
                        event: "grant_not_sealed")
                }
                throw RelayError(.internalError)
            }
            metrics.request(endpoint: Endpoint.grant.rawValue, outcome: "ok", worker: worker)
            return HTTP1Response.json(
                200, GrantResponse(grant: text, expiresAt: now + state.configuration.grantLifetimeSeconds).json)
        } catch {
            return answer(error, .grant, worker)
        }
    }

    /// A push, on the worker that read it (`head.worker`), whose own APNs client sends it.
    private func push(_ head: HTTPRequestHead, _ body: [UInt8], responder: HTTPResponder) {
        let state = current
        let admitted = pushesInFlight.add(1, ordering: .relaxed).newValue
        // Not even read when overloaded: the push is refused, and its phone not counted.
        let overloaded = admitted > state.configuration.server.maxPushesInFlight
        let opened = overloaded ? nil : openPush(body, state)
        limits.decide(ReadRequest(kind: .push(opened), state: state, responder: responder), head, self)
    }

    /// Answers a push: it is no longer in flight.
    private func finish(_ response: HTTP1Response, _ responder: HTTPResponder) {
        pushesInFlight.subtract(1, ordering: .relaxed)
        responder.respond(response)
    }

    private func openPush(_ body: [UInt8], _ state: RelayState) -> Result<OpenedPush, RelayError> {
        do throws(RelayError) {
            let request = try PushRequest.parse(body)
            do throws(GrantError) {
                let opened = try GrantCodec.openNamingKey(
                    request.grant, keys: state.secrets.relayKeys, now: clock.unixSeconds,
                    lifetime: state.configuration.grantLifetimeSeconds)
                return .success(OpenedPush(request: request, grant: opened.grant, keyID: opened.keyID))
            } catch {
                throw error.relayError
            }
        } catch {
            return .failure(error)
        }
    }

    /// The rest of a push once the per-phone limit has decided: on to APNs, or the refusal.
    private func send(_ opened: OpenedPush, _ push: ReadRequest, _ worker: Int, _ decision: LimitDecision) {
        let responder = push.responder
        switch decision {
        case .allowed: break
        case .limited(let retryAfter):
            metrics.limited("phone", worker: worker)
            finish(answer(RelayError(.rateLimited, retryAfter: retryAfter, limit: .phone), .push, worker), responder)
            return
        case .unavailable(let retryAfter):
            finish(answer(RelayError(.overloaded, retryAfter: retryAfter), .push, worker), responder)
            return
        }
        let grant = opened.grant
        // A grant for an environment whose key was removed can no longer deliver.
        guard let gateway = push.state.gateways[grant.environment] else {
            finish(answer(.apnsNotReached, .push, worker), responder)
            return
        }
        let settings = push.state.configuration.apns.notificationSettings
        let notification = Notification(
            push: opened.request, token: grant.token, settings: settings,
            expiresAt: settings.expiration(now: clock.unixSeconds))
        gateway.send(notification, worker: worker, metrics: metrics) { [self] outcome in
            switch outcome {
            case .success(let apnsID):
                metrics.request(endpoint: Endpoint.push.rawValue, outcome: "ok", worker: worker)
                let body = apnsID.map { #"{"apns_id":""# + JSONText.escape($0) + #""}"# } ?? "{}"
                finish(HTTP1Response.json(200, body), responder)
            case .failure(let error):
                finish(answer(error, .push, worker), responder)
            }
        }
    }

    /// The answer to a request still waiting when a stopping relay's grace period has ended and its APNs clients
    /// have answered theirs: it never reached APNs, so 503 `overloaded` (counted in the first worker's metrics: the
    /// server's worker is not named, and it is the last count of a stop).
    func abandoned(route: Int) -> HTTP1Response {
        answer(RelayError(.overloaded, retryAfter: 1), Route(number: route).endpoint, 0)
    }

    // MARK: Helpers

    /// The per-address key: the socket peer, or the trusted proxy's header when configured. Takes the state, not
    /// its configuration: a configuration passed by value is a copy of every field (a retain each), on every request.
    ///
    /// The socket peer's key is worked out once per connection and kept in its memo (the secret never changes while
    /// the handler lives); a key from the proxy's header is worked out per request, since the requests of one proxy
    /// connection come from many clients.
    func addressKey(_ head: HTTPRequestHead, _ state: RelayState) -> LimiterKey {
        // A list means the last entry: the one the trusted proxy appended. The header on several lines is one
        // list (RFC 9110, 5.3), so it is the last line's last entry: earlier lines may be the client's own.
        // Empty elements are no entries (RFC 9110, 5.6.1).
        if let name = state.configuration.clientIPHeader,
            let last = head.headers.values(name).lazy.compactMap({ line in
                line.split(separator: ",").last { $0.contains { $0 != " " && $0 != "\t" } }
            }).last,
            let parsed = SocketPeer.parse(last.filter { $0 != " " && $0 != "\t" })
        {
            return .address(parsed.bytes, secret: addressSecret)
        }
        if let words = head.peerMemo.digest { return LimiterKey(words: words) }
        let key = LimiterKey.address(head.peer.bytes, secret: addressSecret)
        head.peerMemo.digest = key.words
        return key
    }

    /// An error answer on the public listener, counted by endpoint and code in `worker`'s metrics.
    func answer(_ error: RelayError, _ endpoint: Endpoint, _ worker: Int) -> HTTP1Response {
        metrics.request(endpoint: endpoint.rawValue, outcome: error.code.rawValue, worker: worker)
        return error.response(allow: endpoint.allow)
    }
}

/// Minimal escaping for text the relay puts into its own JSON answers.
enum JSONText {
    static func escape(_ text: String) -> String {
        // The usual text (an apns-id is a UUID) needs nothing: return it without rebuilding it. Checked on the
        // string's own storage (iterating its `utf8` view cost about 35 instructions a byte).
        func needsNothing(_ bytes: some Sequence<UInt8>) -> Bool {
            !bytes.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        }
        if text.utf8.withContiguousStorageIfAvailable(needsNothing) ?? needsNothing(text.utf8) { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += " "
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
