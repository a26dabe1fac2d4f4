import MonotonicTime

/// One key's fixed window: the pure state machine behind every limiter.
struct LimitWindow: Equatable, Sendable {
    var start: Instant
    var count: Int
    /// The end of the block; the origin when not blocked.
    var blockedUntil: Instant = 0

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
            return .allowed
        }
        if policy.block > 0 {
            blockedUntil = now + policy.block
            return .limited(retryAfter: Self.seconds(policy.block))
        }
        return .limited(retryAfter: Self.seconds(start + policy.period - now))
    }

    /// Whole seconds, rounded up, at least 1.
    static func seconds(_ nanoseconds: UInt64) -> Int {
        max(1, Int(nanoseconds / 1_000_000_000 + (nanoseconds % 1_000_000_000 == 0 ? 0 : 1)))
    }
}
