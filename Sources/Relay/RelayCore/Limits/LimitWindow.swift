import MonotonicTime

/// One key's fixed window: the pure state machine behind every limiter.
struct LimitWindow: Equatable, Sendable {
    var start: Instant
    var count: Int
    /// The end of the block; the origin when not blocked.
    var blockedUntil: Instant = 0
    /// Requests admitted in this window not yet added to a shared store (``carryOver(now:policy:)``): with a shared
    /// store, the ones this instance admitted alone while the store could not decide.
    var uncarried = 0

    init(start: Instant) {
        self.start = start
        count = 0
    }

    /// When this window no longer matters.
    func expiry(_ policy: LimitPolicy) -> Instant {
        max(start + policy.period, blockedUntil)
    }

    /// Counts a request at `now` and decides it. Requests made while blocked do not extend the block.
    mutating func admit(now: Instant, policy: LimitPolicy) -> LimitDecision {
        if now < blockedUntil {
            return .limited(retryAfter: Self.seconds(blockedUntil - now))
        }
        if now >= start + policy.period || blockedUntil != 0 {
            self = LimitWindow(start: now)
        }
        count += 1
        if count <= policy.requests {
            uncarried += 1
            return .allowed
        }
        if policy.block > 0 {
            blockedUntil = now + policy.block
            return .limited(retryAfter: Self.seconds(policy.block))
        }
        return .limited(retryAfter: Self.seconds(start + policy.period - now))
    }

    /// What of this window a shared store has yet to count at `now`: the admissions not yet carried and how long
    /// ago the window opened (nanoseconds), while the window is still open; nil when there is nothing to carry (none
    /// admitted since the last carry, or the window has passed: its admissions belong to a shared window that has
    /// passed too).
    func carryOver(now: Instant, policy: LimitPolicy) -> (count: Int, age: UInt64)? {
        guard uncarried > 0, now >= start, now < start + policy.period else { return nil }
        return (uncarried, now - start)
    }

    /// Whole seconds, rounded up, at least 1.
    static func seconds(_ nanoseconds: UInt64) -> Int {
        max(1, Int(nanoseconds / 1_000_000_000 + (nanoseconds % 1_000_000_000 == 0 ? 0 : 1)))
    }
}
