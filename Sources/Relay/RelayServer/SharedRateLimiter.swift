import MonotonicTime
import RedisClient
import RelayCore
import Synchronization

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
        store.carry.setCarrier { [weak self] worker in self?.carryOver(worker: worker) }
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
        guard store.carry.isClear else {
            // What was admitted alone goes to Redis before any decision there; this one is decided alone too, and
            // carried after the rest.
            carryOver(on: pipeline)
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
            store.carry.owe()
            completion(addressDecision, nil)
            return
        }
        store.countFallback(limit: phone.name)
        let phoneDecision = phone.local.admit(phoneKey, now: now)
        store.carry.owe()
        completion(addressDecision, phoneDecision)
    }

    // MARK: Carrying over

    /// One key's admissions to carry over, and its limit.
    typealias Owed = (limit: SharedRateLimiter, admissions: CarriedAdmissions)

    /// The most keys one batch of carrying over sends: its requests all leave in one write and are answered well
    /// within the store's timeout.
    static let carryOverBatch = SharedLimitsScript.carryOverKeys * 32

    /// Adds what this instance admitted alone to Redis, on `pipeline` (on its loop), unless a carry-over is under way
    /// or nothing is owed: rounds that each take everything owed (one pass over the windows) and send it in batches
    /// of at most ``carryOverBatch`` keys, one batch after another, until a round finds nothing left; then decisions
    /// are made in Redis again. A batch not answered gives back its admissions and the round's rest, to be carried
    /// by the next try.
    func carryOver(on pipeline: RedisPipeline) {
        guard !store.carry.isClear, pipeline.isConnected, store.carry.begin() else { return }
        carryRound(on: pipeline)
    }

    /// ``carryOver(on:)`` on the pipeline of `worker` (its pipeline is set up again).
    func carryOver(worker: Int) {
        guard let pipeline = store.pipeline(worker: worker) else { return }
        carryOver(on: pipeline)
    }

    private func carryRound(on pipeline: RedisPipeline) {
        let through = store.carry.owedSoFar
        let now = clock.monotonicNow
        let owed: [Owed] =
            address.local.takeCarryOver(now: now, limit: .max).map { (address, $0) }
            + phone.local.takeCarryOver(now: now, limit: .max).map { (phone, $0) }
        guard !owed.isEmpty else {
            // Everything owed up to `through` is in Redis; a local decision made since is carried by another round.
            if store.carry.end(through: through) { carryOver(on: pipeline) }
            return
        }
        carryBatch(owed[...], through: pipeline)
    }

    /// Sends the first ``carryOverBatch`` keys of `owed`, then (once all are answered) the rest, then another round.
    private func carryBatch(_ owed: ArraySlice<Owed>, through pipeline: RedisPipeline) {
        guard !owed.isEmpty else {
            carryRound(on: pipeline)
            return
        }
        let batch = Array(owed.prefix(Self.carryOverBatch))
        let rest = owed.dropFirst(Self.carryOverBatch)
        let requests = stride(from: 0, to: batch.count, by: SharedLimitsScript.carryOverKeys).map {
            Array(batch[$0..<min(batch.count, $0 + SharedLimitsScript.carryOverKeys)])
        }
        let round = CarryRound(requests: requests.count)
        for request in requests {
            let call = RedisPipeline.prepare(
                script: SharedLimitsScript.source, keyLengths: request.map { $0.limit.keyLength },
                arguments: SharedLimitsScript.carryOverArguments(
                    address: address.local.policy, phone: phone.local.policy,
                    admissions: request.map {
                        (kind: $0.limit === address ? "a" : "p", $0.admissions.count, $0.admissions.age)
                    }))
            let sent = pipeline.evaluate(
                call,
                writingKeys: { index, target in
                    request[index].limit.writeStoreKey(request[index].admissions.key, into: target)
                }
            ) { [self] result in
                let answered = if case .success(let answer) = result { answer.first >= 0 } else { false }
                finish(round, request, answered: answered, rest: rest, on: pipeline)
            }
            if !sent { finish(round, request, answered: false, rest: rest, on: pipeline) }
        }
    }

    /// One carry-over request answered (or not); the last of its batch sends the next, or gives the rest back.
    private func finish(
        _ round: CarryRound, _ request: [Owed], answered: Bool, rest: ArraySlice<Owed>, on pipeline: RedisPipeline
    ) {
        if !answered { giveBack(request[...]) }
        guard let allAnswered = round.finished(answered: answered) else { return }
        guard allAnswered else {
            giveBack(rest)
            store.carry.stop()
            return
        }
        carryBatch(rest, through: pipeline)
    }

    /// Admissions Redis did not take, back to their windows (to be carried by the next try).
    private func giveBack(_ owed: ArraySlice<Owed>) {
        for limit in [address, phone] {
            limit.local.restore(owed.filter { $0.limit === limit }.map(\.admissions))
        }
    }

    func sweep(now: Instant) {
        address.local.sweep(now: now)
        phone.local.sweep(now: now)
    }
}

/// The requests of one round of carrying over, until the last is answered.
private final class CarryRound: Sendable {
    private let state: Mutex<(remaining: Int, allAnswered: Bool)>

    init(requests: Int) {
        state = Mutex((requests, true))
    }

    /// One request is done; the round's outcome (every request answered) once it was the last, else nil.
    func finished(answered: Bool) -> Bool? {
        state.withLock { state in
            state.remaining -= 1
            state.allAnswered = state.allAnswered && answered
            return state.remaining == 0 ? state.allAnswered : nil
        }
    }
}

/// Whether this instance owes Redis what it admitted alone (docs/DESIGN.md, "Failover"): every local decision
/// (``owe()``, once its admissions are in the local windows) is owed until a carry-over round that began after it
/// found nothing left to take. While anything is owed, decisions stay local and a carry-over runs.
final class SharedCarryOver: Sendable {
    private let owed = Atomic<Int>(0)
    /// The value of `owed` up to which everything is in Redis.
    private let carried = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    /// Starts a carry-over on a worker's pipeline once it is set up again (set by ``SharedLimits``).
    private let carrier = Mutex<(@Sendable (_ worker: Int) -> Void)?>(nil)

    /// Nothing owed: decisions are made in Redis.
    var isClear: Bool { owed.load(ordering: .acquiring) == carried.load(ordering: .acquiring) }

    var owedSoFar: Int { owed.load(ordering: .acquiring) }

    /// A local decision was made (its admissions are in the local windows).
    func owe() {
        owed.wrappingAdd(1, ordering: .acquiringAndReleasing)
    }

    /// Takes the carry-over for the caller; false when one is under way.
    func begin() -> Bool {
        running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// A round found nothing left of what was owed up to `through`: the carry-over ends. True when more was owed
    /// meanwhile (another carry-over should begin).
    func end(through: Int) -> Bool {
        carried.store(through, ordering: .releasing)
        running.store(false, ordering: .releasing)
        return !isClear
    }

    /// A round was not answered: the carry-over ends, what it took given back; the next decision tries again.
    func stop() {
        running.store(false, ordering: .releasing)
    }

    func setCarrier(_ carrier: @escaping @Sendable (_ worker: Int) -> Void) {
        self.carrier.withLock { $0 = carrier }
    }

    /// The pipeline of `worker` is set up (again): carry over on it now, rather than at its next request.
    func ready(worker: Int) {
        guard !isClear, let carrier = carrier.withLock({ $0 }) else { return }
        carrier(worker)
    }
}
