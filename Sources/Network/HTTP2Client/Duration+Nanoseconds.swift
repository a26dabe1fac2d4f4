extension Duration {
    /// The duration in whole nanoseconds, for the monotonic clock the machines take as input: 0 when
    /// negative, `UInt64.max` when too long to count (centuries).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        guard seconds < 18_000_000_000 else { return .max }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
