/// A point in time on the relay's one monotonic clock (CLOCK_MONOTONIC, as `uv_hrtime` reads it), in nanoseconds.
///
/// Machines never read a clock: their shells read the loop's (``EventLoops/EventLoop/monotonicNow()``) once per input
/// and pass it in, and their tests pass instants of their own (an integer literal is an instant in nanoseconds).
/// Lengths of time beside it are nanoseconds (`UInt64`), as the configurations hold them.
public struct Instant: Comparable, Hashable, Sendable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    /// Nanoseconds since an arbitrary origin (the machine's boot, for the real clock).
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    public init(integerLiteral nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    public static func < (lhs: Instant, rhs: Instant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The instant `nanoseconds` later; the farthest instant rather than a wrap when that does not fit (an
    /// unbounded timeout is a deadline never reached, not one already passed).
    @inlinable
    public static func + (lhs: Instant, nanoseconds: UInt64) -> Instant {
        let (sum, overflow) = lhs.nanoseconds.addingReportingOverflow(nanoseconds)
        return Instant(nanoseconds: overflow ? .max : sum)
    }

    @inlinable
    public static func += (lhs: inout Instant, nanoseconds: UInt64) {
        lhs = lhs + nanoseconds
    }

    /// The instant `nanoseconds` earlier, or the origin when there is not that much before it.
    @inlinable
    public static func - (lhs: Instant, nanoseconds: UInt64) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds > nanoseconds ? lhs.nanoseconds - nanoseconds : 0)
    }

    /// The nanoseconds from `earlier` to `lhs`; zero when `earlier` is not earlier.
    @inlinable
    public static func - (lhs: Instant, earlier: Instant) -> UInt64 {
        lhs.nanoseconds > earlier.nanoseconds ? lhs.nanoseconds - earlier.nanoseconds : 0
    }

    /// The first whole millisecond at or after this instant: a millisecond timer armed for it never fires early.
    @inlinable
    public var millisecondsRoundedUp: UInt64 {
        nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
    }

    public var description: String { "\(nanoseconds) ns" }
}
