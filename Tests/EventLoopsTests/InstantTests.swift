import MonotonicTime
import Testing

extension EventLoopsSuite {
    /// The one clock's instants: arithmetic that neither traps nor wraps, and the millisecond a timer is armed for.
    @Suite struct InstantTests {
        @Test func aDeadlineTooFarAwayIsNeverReachedRatherThanPassed() {
            let now = Instant(nanoseconds: 5)
            #expect(now + UInt64.max == Instant(nanoseconds: .max))
            #expect(now + UInt64.max > now)
            #expect(now + 3 == 8)
        }

        @Test func aLengthIsNeverNegative() {
            let earlier: Instant = 3_000
            let later: Instant = 5_000
            #expect(later - earlier == 2_000)
            #expect(earlier - later == 0)
            #expect(earlier - UInt64(10_000) == 0)
        }

        @Test(
            arguments: [(0, 0), (1, 1), (999_999, 1), (1_000_000, 1), (1_000_001, 2), (2_500_000, 3)]
                as [(UInt64, UInt64)])
        func aTimerIsArmedForTheFirstMillisecondAtOrAfterTheInstant(nanoseconds: UInt64, milliseconds: UInt64) {
            #expect(Instant(nanoseconds: nanoseconds).millisecondsRoundedUp == milliseconds)
        }
    }
}
