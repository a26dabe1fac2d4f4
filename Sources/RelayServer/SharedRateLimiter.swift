import RedisClient
import RelayCore

/// One limit (phone or address) counted in the shared store, with this instance's in-memory
/// limiter (same policy) as the fallback while the store cannot answer.
final class SharedRateLimiter: AsynchronousRateLimiter {
    /// `phone` or `address`: the metrics' label and the 429's limit.
    let name: String
    let store: SharedLimitsStore
    let local: InMemoryRateLimiter
    /// The script's call for this limit, formatted once (only the key and the tag change per request).
    private let call: RedisPipeline.PreparedCall
    /// The store key before its hex digest (``LimiterKey/storeKey(prefix:kind:)``): the prefix, the kind and `:`.
    private let keyStart: [UInt8]
    private let clock: any RelayClock

    init(
        name: String, kind: Character, policy: LimitPolicy, capacity: Int, store: SharedLimitsStore,
        clock: any RelayClock
    ) {
        self.name = name
        self.store = store
        self.clock = clock
        local = InMemoryRateLimiter(policy: policy, capacity: capacity)
        let anyKey = LimiterKey(digest: [UInt8](repeating: 0, count: 32))
        keyStart = Array(anyKey.storeKey(prefix: store.settings.keyPrefix, kind: kind).dropLast(64))
        // The server's clock (empty time argument): every instance counts one window alike.
        call = store.pipeline.prepare(keyLength: keyStart.count + 64, arguments: SharedWindowScript.arguments(policy))
    }

    func admit(_ key: LimiterKey, now: UInt64, completion: @escaping @Sendable (LimitDecision) -> Void) {
        let start = keyStart
        let sent = store.pipeline.evaluate(
            call,
            writingKey: { target in
                start.withUnsafeBytes { target.copyMemory(from: $0) }
                key.writeHex(into: UnsafeMutableRawBufferPointer(rebasing: target[start.count...]))
            }
        ) {
            [self] result in
            if case .success(let value) = result, let decision = SharedWindowScript.decision(value) {
                completion(decision)
            } else {
                completion(fallback(key))
            }
        }
        if !sent { completion(fallback(key)) }
    }

    /// The decision without Redis: this instance's own window, or 503 with `refuse`.
    private func fallback(_ key: LimiterKey) -> LimitDecision {
        store.countFallback(limit: name)
        switch store.settings.onFailure {
        case .local: return local.admit(key, now: clock.uptimeNanoseconds)
        case .refuse: return .unavailable(retryAfter: 1)
        }
    }
}

/// How RelayHTTPHandler reaches one limit: decided at once in memory (no work added to the request's
/// path), or through the shared store.
enum LimiterPath: Sendable {
    case immediate(InMemoryRateLimiter)
    case shared(SharedRateLimiter)

    func sweep(now: UInt64) {
        switch self {
        case .immediate(let limiter): limiter.sweep(now: now)
        case .shared(let limiter): limiter.local.sweep(now: now)
        }
    }
}
