import Glibc

/// The runs' monotonic clock and their one bounded wait: a recipe run waits on other processes (a port answering,
/// a line in a log, a container's state) and looks again every tenth of a second until a bound.
enum RecipeClock {
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// True as soon as `condition` holds; false if it did not within `seconds` (looked at every 0.1 s), or once a
    /// signal interrupted the run (container-test then exits 130 whatever the check says).
    static func within<Failure: Error>(_ seconds: Double, _ condition: () throws(Failure) -> Bool) throws(Failure)
        -> Bool
    {
        let deadline = now() + seconds
        while !RecipeProcess.interrupted {
            if try condition() { return true }
            guard now() < deadline else { return false }
            // A deliberate pace, the runner's only one: what is waited for is another process's doing, with no
            // event of it to wait on.
            usleep(100_000)
        }
        return false
    }
}
