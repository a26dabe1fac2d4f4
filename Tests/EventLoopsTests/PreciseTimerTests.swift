import RelayTestSupport
import Testing

@testable import EventLoops

extension EventLoopsSuite {
    @Suite struct PreciseTimerTests {
        @Test func firesAtItsNanosecondDeadlineNeverBeforeAndCanBeScheduledAgain() throws {
            let loop = try EventLoop(name: "test-precise")
            defer { loop.stop() }
            let fired = Recorder<UInt64>()
            let deadline = EventLoop.monotonicNanoseconds() + 3_500_000
            let timer = try loop.performAndWait { () -> LoopBound<PreciseTimer> in
                let timer = try PreciseTimer(on: loop) { fired.record(EventLoop.monotonicNanoseconds()) }
                timer.schedule(atNanoseconds: deadline)
                return LoopBound(timer, on: loop)
            }
            #expect(fired.wait { $0.count == 1 })
            #expect(fired.all[0] >= deadline)
            #expect(try loop.performAndWait { timer.value.isScheduled } == false)
            // A deadline already passed fires on the next turn.
            try loop.performAndWait { timer.value.schedule(atNanoseconds: 1) }
            #expect(fired.wait { $0.count == 2 })
        }

        @Test func reschedulingMovesTheDeadlineCancelStopsItAndCloseReleasesTheDescriptor() throws {
            let loop = try EventLoop(name: "test-precise2")
            defer { loop.stop() }
            let before = openDescriptors().filter { $0.contains("timerfd") }.count
            let fired = Recorder<String>()
            let timers = try loop.performAndWait { () -> LoopBound<[PreciseTimer]> in
                let now = EventLoop.monotonicNanoseconds()
                let moved = try PreciseTimer(on: loop) { fired.record("moved") }
                moved.schedule(atNanoseconds: now + 10_000_000_000)
                moved.schedule(atNanoseconds: now + 2_000_000)  // replaces the first schedule
                let cancelled = try PreciseTimer(on: loop) { fired.record("cancelled") }
                cancelled.schedule(atNanoseconds: now + 5_000_000)
                cancelled.cancel()
                let sentinel = try PreciseTimer(on: loop) { fired.record("sentinel") }
                sentinel.schedule(atNanoseconds: now + 40_000_000)
                return LoopBound([moved, cancelled, sentinel], on: loop)
            }
            #expect(fired.wait { $0.contains("sentinel") })
            #expect(fired.all == ["moved", "sentinel"])
            #expect(openDescriptors().filter { $0.contains("timerfd") }.count == before + 3)
            try loop.performAndWait { for timer in timers.value { timer.close() } }
            try loop.performAndWait {}  // the close callbacks have run on the turn before
            #expect(openDescriptors().filter { $0.contains("timerfd") }.count == before)
            #expect(try loop.performAndWait { loop.openHandles } == 0)
        }
    }
}
