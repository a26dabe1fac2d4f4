import MonotonicTime
import Synchronization

/// The default limiter: fixed windows in memory, sharded to keep lock contention low, holding at
/// most `capacity` keys. A window is forgotten once it has passed; when the limiter is full, the
/// least recently used key is evicted (it merely starts afresh), so keys in active use keep their
/// counts under a flood of new ones.
///
/// Each window also keeps how many of its admissions a shared store has yet to count: an instance's fallback while
/// the store cannot decide hands them over when it decides there again (``takeCarryOver(now:limit:)``), bounded as
/// the windows are (a window forgotten or evicted takes its uncarried admissions with it).
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

    /// Takes at most `limit` windows' uncarried admissions at `now` (their windows still open), marking them
    /// carried: what a shared store must add before it decides again. Empty when nothing is left to carry.
    public func takeCarryOver(now: Instant, limit: Int) -> [CarriedAdmissions] {
        var taken: [CarriedAdmissions] = []
        for shard in shards {
            guard taken.count < limit else { break }
            shard.state.withLock { shard in
                for index in shard.entries.indices {
                    guard taken.count < limit else { return }
                    let window = shard.entries.values[index].window
                    guard let carried = window.carryOver(now: now, policy: policy) else { continue }
                    taken.append(
                        CarriedAdmissions(
                            key: shard.entries.keys[index], count: carried.count, age: carried.age,
                            windowStart: window.start))
                    shard.entries.values[index].window.uncarried = 0
                }
            }
        }
        return taken
    }

    /// Gives back admissions taken by ``takeCarryOver(now:limit:)`` that the store did not take (its answer never
    /// came): they are carried again later, if their window is still the key's.
    public func restore(_ admissions: [CarriedAdmissions]) {
        for carried in admissions {
            let shard = shards[Int(carried.key.words.2 % UInt64(shards.count))]
            shard.state.withLock { shard in
                guard let index = shard.entries.index(forKey: carried.key),
                    shard.entries.values[index].window.start == carried.windowStart
                else { return }
                shard.entries.values[index].window.uncarried += carried.count
            }
        }
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

/// One key's admissions that a shared store has yet to count (``InMemoryRateLimiter/takeCarryOver(now:limit:)``): how
/// many, and how long before the time they were taken at their window opened (nanoseconds), so that the store can
/// open the same window on its own clock when it has none open for the key.
public struct CarriedAdmissions: Equatable, Sendable {
    public var key: LimiterKey
    public var count: Int
    public var age: UInt64
    /// The local window's start (to give the admissions back to the same window only).
    public var windowStart: Instant

    public init(key: LimiterKey, count: Int, age: UInt64, windowStart: Instant) {
        self.key = key
        self.count = count
        self.age = age
        self.windowStart = windowStart
    }
}
