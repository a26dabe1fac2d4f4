import HTTPServer
import MonotonicTime
import RelayCore
import RelayCrypto

/// The per-address and per-phone limits as the handler meets them (docs/DESIGN.md, "Several instances"): the two
/// implementations differ only in when they decide, and the handler calls the same four steps on either.
///
/// - ``InMemoryRequestLimits`` decides the address with the head, before any body is read, and the phone at once
///   once the body is read and the grant opened.
/// - ``SharedRequestLimits`` decides both in one script call once the body is read and the grant opened; a request
///   refused before its body is read still counts against its address.
///
/// Either ends a read request in ``RelayHTTPHandler/decided(_:worker:address:phone:)`` with the two decisions: the
/// answers keep their order there (a refused address first, whatever the body; then a bad body or grant; then the
/// phone). A final class each, so no request allocates for its limits in memory.
protocol RequestLimits: AnyObject, Sendable {
    /// The key for hashing client addresses.
    var addressSecret: HMACSHA256.Key { get }
    /// The limiters that count in the shared store (none in memory): a test checks that they are freed.
    var sharedLimiters: [SharedRateLimiter] { get }

    /// What the head of a request counted against its address gets: its answer, its body read, or a decision to come.
    func head(_ head: HTTPRequestHead, _ route: Route, _ handler: RelayHTTPHandler) -> HeadDecision

    /// The address's decision for a request refused before its body was read (oversized target or headers, broken
    /// framing, a body over its limit), which counts against its address once: `headCounted` says whether its head
    /// reached ``head(_:_:_:)``. Answers at once.
    func refusedBeforeBody(_ head: HTTPRequestHead, headCounted: Bool, _ handler: RelayHTTPHandler) -> LimitDecision

    /// Decides a request whose body is read, then hands it to ``RelayHTTPHandler/decided(_:worker:address:phone:)``
    /// (at once, or later on this thread).
    func decide(_ request: ReadRequest, _ head: HTTPRequestHead, _ handler: RelayHTTPHandler)

    /// Forgets passed windows.
    func sweep(now: Instant)
}

/// A request whose body is read, waiting for its limits' decisions: what it asks, the state it was read under (its
/// configuration, keys and gateways throughout) and where its answer goes.
struct ReadRequest: Sendable {
    enum Kind: Sendable {
        case grant(body: [UInt8])
        /// A push's body parsed and grant opened; nil: refused as overloaded, not even read.
        case push(Result<OpenedPush, RelayError>?)
    }

    let kind: Kind
    let state: RelayState
    let responder: HTTPResponder

    /// The phone to count: only a push whose grant opened (not one refused as overloaded, nor a bad body or grant).
    var phoneKey: LimiterKey? {
        guard case .push(.success(let opened)?) = kind else { return nil }
        return LimiterKey.phone(token: opened.grant.token)
    }
}

/// A push's body parsed and its grant opened.
struct OpenedPush: Sendable {
    let request: PushRequest
    let grant: Grant
    let keyID: UInt8
}

/// The limits of one instance, decided at once in memory: the address at head time (no work added to the request's
/// path), the phone once the grant opened.
final class InMemoryRequestLimits: RequestLimits {
    let address: InMemoryRateLimiter
    let phone: InMemoryRateLimiter
    private let clock: any RelayClock
    /// Random per process: no other instance hashes an address.
    let addressSecret = HMACSHA256.Key(SecureRandom.bytes(count: 32))
    var sharedLimiters: [SharedRateLimiter] { [] }

    init(addressPolicy: LimitPolicy, phonePolicy: LimitPolicy, capacity: Int, clock: any RelayClock) {
        address = InMemoryRateLimiter(policy: addressPolicy, capacity: capacity)
        phone = InMemoryRateLimiter(policy: phonePolicy, capacity: capacity)
        self.clock = clock
    }

    func head(_ head: HTTPRequestHead, _ route: Route, _ handler: RelayHTTPHandler) -> HeadDecision {
        handler.afterAddressLimit(
            address.admit(handler.addressKey(head, handler.current), now: clock.monotonicNow), route, head.method,
            head.worker)
    }

    func refusedBeforeBody(_ head: HTTPRequestHead, headCounted: Bool, _ handler: RelayHTTPHandler) -> LimitDecision {
        headCounted ? .allowed : address.admit(handler.addressKey(head, handler.current), now: clock.monotonicNow)
    }

    func decide(_ request: ReadRequest, _ head: HTTPRequestHead, _ handler: RelayHTTPHandler) {
        // The address was admitted with the head.
        let phoneDecision = request.phoneKey.map { phone.admit($0, now: clock.monotonicNow) }
        handler.decided(request, worker: head.worker, address: .allowed, phone: phoneDecision)
    }

    func sweep(now: Instant) {
        address.sweep(now: now)
        phone.sweep(now: now)
    }
}

/// The limits counted in the shared store (``SharedLimits``): one script call per request, once its body is read,
/// decides the address and then (only for a push whose grant opened) the phone, and hashes the address then.
final class SharedRequestLimits: RequestLimits {
    let limits: SharedLimits
    /// Derived from RELAY_KEYS: every instance hashes an address alike.
    let addressSecret: HMACSHA256.Key
    var sharedLimiters: [SharedRateLimiter] { [limits.address, limits.phone] }

    init(_ limits: SharedLimits, relayKeys: RelayKeys) {
        self.limits = limits
        addressSecret = HMACSHA256.Key(LimiterKey.sharedAddressSecret(relayKeys))
    }

    func head(_ head: HTTPRequestHead, _ route: Route, _ handler: RelayHTTPHandler) -> HeadDecision {
        // The body is read first: the one call comes then.
        if route.readsBody(head.method) { return .readBody(limit: route.bodyLimit) }
        // A 404 or 405 reads no body: its answer waits, suspended, for the address's decision alone.
        let pending = PendingHeadDecision()
        let method = head.method
        let worker = head.worker
        limits.admit(worker: worker, address: handler.addressKey(head, handler.current), phone: nil) { decision, _ in
            pending.decide(handler.afterAddressLimit(decision, route, method, worker))
        }
        return .later(pending)
    }

    func refusedBeforeBody(_ head: HTTPRequestHead, headCounted: Bool, _ handler: RelayHTTPHandler) -> LimitDecision {
        // No head was counted (its call comes once the body is read), so the refusal is; it does not wait.
        limits.admit(worker: head.worker, address: handler.addressKey(head, handler.current), phone: nil) { _, _ in }
        return .allowed
    }

    func decide(_ request: ReadRequest, _ head: HTTPRequestHead, _ handler: RelayHTTPHandler) {
        let worker = head.worker
        limits.admit(worker: worker, address: handler.addressKey(head, request.state), phone: request.phoneKey) {
            addressDecision, phoneDecision in
            handler.decided(request, worker: worker, address: addressDecision, phone: phoneDecision)
        }
    }

    func sweep(now: Instant) {
        limits.sweep(now: now)
    }
}

extension RelayState {
    /// The limits this configuration asks for: in memory, or counted in `store` when there is one.
    func requestLimits(store: SharedLimitsStore?, clock: any RelayClock) -> any RequestLimits {
        let config = configuration
        let capacity = config.server.maxTrackedKeys
        guard let store else {
            return InMemoryRequestLimits(
                addressPolicy: config.ipLimit, phonePolicy: config.pushLimit, capacity: capacity, clock: clock)
        }
        return SharedRequestLimits(
            SharedLimits(
                addressPolicy: config.ipLimit, phonePolicy: config.pushLimit, capacity: capacity, store: store,
                clock: clock),
            relayKeys: secrets.relayKeys)
    }
}
