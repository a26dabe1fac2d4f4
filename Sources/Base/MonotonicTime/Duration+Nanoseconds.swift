extension Duration {
    /// The duration in whole nanoseconds, as ``Instant``s and the configurations count time: 0 when negative,
    /// `UInt64.max` when too long to count (centuries). The one conversion of a `Duration` for the relay, its
    /// simulator and its tools.
    @inlinable
    public var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        guard seconds < 18_000_000_000 else { return .max }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}

extension Instant {
    /// The instant `duration` later (the farthest instant when that does not fit; `now` itself for a negative one).
    @inlinable
    public static func + (lhs: Instant, duration: Duration) -> Instant {
        lhs + duration.nanoseconds
    }
}
