import Glibc

/// The run's monotonic clock and its one pace: the doc test waits on other processes (a port answering, a line
/// in a log), and looks again every tenth of a second until a bound.
enum DocTestClock {
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// True as soon as `condition` holds, false if it did not within `seconds` (looked at every 0.1 s).
    static func within(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = now() + seconds
        while true {
            if condition() { return true }
            guard now() < deadline else { return false }
            // A deliberate pace: another process is being waited for.
            usleep(100_000)
        }
    }
}
