import Glibc

/// Monotonic nanoseconds: the clock of every latency and of the open loop's schedule (the clock of
/// `EventLoop.monotonicNanoseconds()` and of `PreciseTimer` too).
enum MonotonicClock {
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
