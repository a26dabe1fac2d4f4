import MonotonicTime
import Synchronization

/// The default limiter: fixed windows in memory, sharded to keep lock contention low, holding at
/// most `capacity` keys. A window is forgotten once it has passed; when the limiter is full, the
/// least recently used key is evicted (it merely starts afresh), so keys in active use keep their
/// counts under a flood of new ones.
public final class InMemoryRateLimiter: RateLimiter {
    private struct Entry {
        var window: LimitWindow
        var lastUse: UInt64
    }

    private struct Shard {
        var entries: [LimiterKey: Entry] = [:]
        /// Keys in order of use; an item whose `use` is no longer its key's `lastUse` is stale.
        var order: [(key: LimiterKey, use: UInt64)] = []
        var head = 0
        var uses: UInt64 = 0

        var front: (key: LimiterKey, use: UInt64)? { head < order.count ? order[head] : nil }

        mutating func dropFront() {
            head += 1
            if head >= 256 && head * 2 >= order.count {
                order.removeFirst(head)
                head = 0
            }
        }

        mutating func touch(_ key: LimiterKey) -> UInt64 {
            uses += 1
            order.append((key, uses))
            return uses
        }

        /// Rebuilds the order from live entries once stale items dominate it.
        mutating func compactIfNeeded(capacity: Int) {
            guard order.count - head > 4 * max(capacity, entries.count) + 64 else { return }
            order = entries.map { ($0.key, $0.value.lastUse) }.sorted { $0.use < $1.use }
            head = 0
        }
    }

    /// `Mutex` cannot live in an array; each shard's lock sits in its own box.
    private final class Locked: Sendable {
        let state = Mutex(Shard())
    }

    public let policy: LimitPolicy
    private let shards: [Locked]
    private let capacityPerShard: Int

    /// - Parameter capacity: the most keys held at once (about 100 bytes each).
    public init(policy: LimitPolicy, capacity: Int = 1_000_000, shardCount: Int = 16) {
        self.policy = policy
        shards = (0..<shardCount).map { _ in Locked() }
        capacityPerShard = max(1, capacity / shardCount)
    }

    public func admit(_ key: LimiterKey, now: Instant) -> LimitDecision {
        let shard = shards[Int(key.words.2 % UInt64(shards.count))]
        return shard.state.withLock { shard in
            forgetPassed(&shard, now: now)
            let decision: LimitDecision
            if let index = shard.entries.index(forKey: key) {
                // A key in use: counted in its place, hashed once.
                decision = shard.entries.values[index].window.admit(now: now, policy: policy)
                shard.entries.values[index].lastUse = shard.touch(key)
            } else {
                while shard.entries.count >= capacityPerShard, let oldest = shard.front {
                    shard.dropFront()
                    if shard.entries[oldest.key]?.lastUse == oldest.use { shard.entries[oldest.key] = nil }
                }
                var entry = Entry(window: LimitWindow(start: now), lastUse: 0)
                decision = entry.window.admit(now: now, policy: policy)
                entry.lastUse = shard.touch(key)
                shard.entries[key] = entry
            }
            shard.compactIfNeeded(capacity: capacityPerShard)
            return decision
        }
    }

    /// Forgets every passed window now (admissions also do it, shard by shard, as they go).
    public func sweep(now: Instant) {
        for shard in shards { shard.state.withLock { forgetPassed(&$0, now: now) } }
    }

    public var trackedKeys: Int {
        shards.reduce(0) { total, shard in total + shard.state.withLock { $0.entries.count } }
    }

    /// Drops stale order items and passed windows from the front of the order.
    private func forgetPassed(_ shard: inout Shard, now: Instant) {
        while let item = shard.front {
            guard let entry = shard.entries[item.key], entry.lastUse == item.use else {
                shard.dropFront()
                continue
            }
            guard now >= entry.window.expiry(policy) else { return }
            shard.entries[item.key] = nil
            shard.dropFront()
        }
    }
}
