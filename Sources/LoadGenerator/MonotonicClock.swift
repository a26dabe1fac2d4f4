import CSystem
import Glibc

/// Monotonic nanoseconds, and a timerfd that fires at an absolute monotonic instant.
enum MonotonicClock {
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// A non-blocking timerfd on the monotonic clock.
    static func makeTimer() -> Int32 {
        let fd = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        precondition(fd >= 0, "timerfd_create failed")
        return fd
    }

    /// Arms `timer` to fire once at `instant` (monotonic nanoseconds).
    static func arm(_ timer: Int32, at instant: UInt64) {
        var spec = itimerspec()
        spec.it_value.tv_sec = Int(max(instant, 1) / 1_000_000_000)
        spec.it_value.tv_nsec = Int(max(instant, 1) % 1_000_000_000)
        _ = timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &spec, nil)
    }

    /// Consumes a timer expiry so that the timerfd stops being readable.
    static func drain(_ timer: Int32) {
        var expirations: UInt64 = 0
        _ = read(timer, &expirations, 8)
    }
}
