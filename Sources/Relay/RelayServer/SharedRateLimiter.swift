import MonotonicTime
import RedisClient
import RelayCore

/// One limit (phone or address) counted in the shared store: its name, where its keys live in Redis, and this
/// instance's in-memory limiter (same policy) as the fallback while the store cannot answer.
final class SharedRateLimiter: Sendable {
    /// `phone` or `address`: the metrics' label and the 429's limit.
    let name: String
    let local: InMemoryRateLimiter
    /// The store key before its hex digest (``LimiterKey/storeKey(prefix:kind:)``): the prefix, the kind and `:`.
    let keyStart: [UInt8]

    init(name: String, kind: Character, policy: LimitPolicy, capacity: Int, keyPrefix: String) {
        self.name = name
        local = InMemoryRateLimiter(policy: policy, capacity: capacity)
        let anyKey = LimiterKey(digest: [UInt8](repeating: 0, count: 32))
        keyStart = Array(anyKey.storeKey(prefix: keyPrefix, kind: kind).dropLast(64))
    }

    /// The length of every store key of this limit.
    var keyLength: Int { keyStart.count + 64 }

    /// Writes `key`'s store key into `target` (of ``keyLength`` bytes).
    func writeStoreKey(_ key: LimiterKey, into target: UnsafeMutableRawBufferPointer) {
        keyStart.withUnsafeBytes { target.copyMemory(from: $0) }
        key.writeHex(into: UnsafeMutableRawBufferPointer(rebasing: target[keyStart.count...]))
    }
}

/// Both limits counted in the shared store, each request decided by one script call (docs/DESIGN.md, "Several
/// instances"): the address, and then, only if it is admitted, the phone, on the pipeline of the worker that read the
/// request. The requests the worker writes together share a call (``RedisClient/RedisPipeline``).
final class SharedLimits: Sendable {
    let address: SharedRateLimiter
    let phone: SharedRateLimiter
    let store: SharedLimitsStore
    private let clock: any RelayClock
    /// The script's calls, formatted once (only the keys and the tag change per request).
    private let addressOnly: RedisPipeline.PreparedCall
    private let addressAndPhone: RedisPipeline.PreparedCall

    /// The two decisions: the address's, and the phone's when it was asked for and the address was admitted.
    typealias Completion = @Sendable (_ address: LimitDecision, _ phone: LimitDecision?) -> Void

    init(
        addressPolicy: LimitPolicy, phonePolicy: LimitPolicy, capacity: Int, store: SharedLimitsStore,
        clock: any RelayClock
    ) {
        let prefix = store.settings.keyPrefix
        address = SharedRateLimiter(
            name: "address", kind: "a", policy: addressPolicy, capacity: capacity, keyPrefix: prefix)
        phone = SharedRateLimiter(name: "phone", kind: "p", policy: phonePolicy, capacity: capacity, keyPrefix: prefix)
        self.store = store
        self.clock = clock
        // The server's clock (no time argument): every instance counts one window alike.
        let arguments = SharedLimitsScript.arguments(address: addressPolicy, phone: phonePolicy)
        addressOnly = RedisPipeline.prepare(
            script: SharedLimitsScript.source, keyLengths: [address.keyLength], arguments: arguments)
        addressAndPhone = RedisPipeline.prepare(
            script: SharedLimitsScript.source, keyLengths: [address.keyLength, phone.keyLength], arguments: arguments)
    }

    /// Counts one request for `addressKey` and, if the address is admitted, for `phoneKey`, in one round trip on
    /// the pipeline of `worker` (whose loop runs this); `completion` runs on this thread (later, or at once when
    /// Redis cannot be asked).
    func admit(
        worker: Int, address addressKey: LimiterKey, phone phoneKey: LimiterKey?, completion: @escaping Completion
    ) {
        guard let pipeline = store.pipeline(worker: worker) else {
            fallback(addressKey, phoneKey, completion)
            return
        }
        let call = phoneKey == nil ? addressOnly : addressAndPhone
        let sent = pipeline.evaluate(
            call,
            writingKeys: { index, target in
                if index == 0 {
                    address.writeStoreKey(addressKey, into: target)
                } else if let phoneKey {
                    phone.writeStoreKey(phoneKey, into: target)
                }
            }
        ) { [self] result in
            if case .success(let answer) = result,
                let decisions = SharedLimitsScript.decisions(address: answer.first, phone: answer.second),
                (decisions.phone == nil) == (phoneKey == nil || decisions.address != .allowed)
            {
                completion(decisions.address, decisions.phone)
            } else {
                fallback(addressKey, phoneKey, completion)
            }
        }
        if !sent { fallback(addressKey, phoneKey, completion) }
    }

    /// The decisions without Redis: this instance's own windows (the phone only if the address is admitted), or
    /// 503 with `refuse`.
    private func fallback(_ addressKey: LimiterKey, _ phoneKey: LimiterKey?, _ completion: Completion) {
        store.countFallback(limit: address.name)
        let now = clock.monotonicNow
        let addressDecision: LimitDecision
        switch store.settings.onFailure {
        case .local: addressDecision = address.local.admit(addressKey, now: now)
        case .refuse:
            completion(.unavailable(retryAfter: 1), nil)
            return
        }
        guard addressDecision == .allowed, let phoneKey else {
            completion(addressDecision, nil)
            return
        }
        store.countFallback(limit: phone.name)
        completion(addressDecision, phone.local.admit(phoneKey, now: now))
    }

    func sweep(now: Instant) {
        address.local.sweep(now: now)
        phone.local.sweep(now: now)
    }
}
