import MonotonicTime
import RelayTestSupport
import Testing

@testable import EventLoops

extension EventLoopsSuite {
    @Suite struct LoopTimerTests {
        @Test func firesAfterItsDelayAndCanBeScheduledAgain() throws {
            let loop = try EventLoop(name: "test-timer")
            defer { loop.stop() }
            let fired = Recorder<UInt64>()
            let timer = try loop.performAndWait { () -> LoopBound<LoopTimer> in
                let timer = LoopTimer(on: loop) { fired.record(loop.now) }
                timer.schedule(afterMilliseconds: 20)
                fired.record(loop.now)  // the start
                return LoopBound(timer, on: loop)
            }
            #expect(fired.wait { $0.count == 2 })
            let start = fired.all[0]
            #expect(fired.all[1] >= start + 20)
            #expect(try loop.performAndWait { timer.value.isScheduled } == false)
            try loop.performAndWait { timer.value.schedule(at: loop.now + 5) }
            #expect(fired.wait { $0.count == 3 })
        }

        @Test func reschedulingMovesTheDeadlineAndCancelStopsIt() throws {
            let loop = try EventLoop(name: "test-timer2")
            defer { loop.stop() }
            let fired = Recorder<String>()
            try loop.performAndWait {
                let moved = LoopTimer(on: loop) { fired.record("moved") }
                moved.schedule(afterMilliseconds: 10_000)
                moved.schedule(afterMilliseconds: 5)  // replaces the first schedule
                let cancelled = LoopTimer(on: loop) { fired.record("cancelled") }
                cancelled.schedule(afterMilliseconds: 10)
                cancelled.cancel()
                let sentinel = LoopTimer(on: loop) { fired.record("sentinel") }
                sentinel.schedule(afterMilliseconds: 60)
            }
            #expect(fired.wait { $0.contains("sentinel") })
            #expect(fired.all == ["moved", "sentinel"])
        }

        @Test func aClosedTimerNeverFiresAndReleasesItsHandler() throws {
            let loop = try EventLoop(name: "test-timer3")
            defer { loop.stop() }
            let fired = Recorder<String>()
            final class Owner: Sendable {}
            let released = Recorder<Bool>()
            try loop.performAndWait {
                let owner = Owner()
                let timer = LoopTimer(on: loop) { [owner] in
                    _ = owner
                    fired.record("closed")
                }
                timer.schedule(afterMilliseconds: 5)
                timer.close()
                let sentinel = LoopTimer(on: loop) { fired.record("sentinel") }
                sentinel.schedule(afterMilliseconds: 30)
                weak let weakOwner = owner
                loop.enqueue { released.record(weakOwner == nil) }
            }
            #expect(fired.wait { $0.contains("sentinel") })
            #expect(fired.all == ["sentinel"])
            #expect(released.all == [true])
            #expect(try loop.performAndWait { loop.openHandles } == 1)
        }

        @Test func anInstantIsNeverReachedBeforeTheTimerFires() throws {
            let loop = try EventLoop(name: "test-timer4")
            defer { loop.stop() }
            let fired = Recorder<(due: Instant, at: Instant)>()
            try loop.performAndWait {
                // Not on a millisecond's boundary: the timer rounds up, so the clock has passed it when it fires.
                for delay: UInt64 in [0, 1_500_000, 7_250_000] {
                    let due = EventLoop.monotonicNow() + delay
                    let timer = LoopTimer(on: loop) { fired.record((due, EventLoop.monotonicNow())) }
                    timer.schedule(at: due)
                }
            }
            #expect(fired.wait { $0.count == 3 })
            for (due, at) in fired.all { #expect(at >= due) }
        }

        @Test func noLaterThanKeepsAnEarlierScheduleAndMovesALaterOne() throws {
            let loop = try EventLoop(name: "test-timer5")
            defer { loop.stop() }
            let fired = Recorder<String>()
            let scheduled = try loop.performAndWait { () -> [UInt64?] in
                let start = EventLoop.monotonicNow()
                let early = LoopTimer(on: loop) { fired.record("early") }
                early.schedule(at: start + 5_000_000)
                let kept = early.deadline
                early.schedule(noLaterThan: start + 10_000_000_000)  // later: the earlier schedule stays
                let late = LoopTimer(on: loop) { fired.record("late") }
                late.schedule(at: start + 10_000_000_000)
                late.schedule(noLaterThan: start + 20_000_000)  // earlier: moved
                return [kept, early.deadline, late.deadline, (start + 20_000_000).millisecondsRoundedUp]
            }
            #expect(scheduled[0] == scheduled[1])
            #expect(scheduled[2] == scheduled[3])
            #expect(fired.wait { $0.count == 2 })
            #expect(fired.all == ["early", "late"])
        }
    }
}
