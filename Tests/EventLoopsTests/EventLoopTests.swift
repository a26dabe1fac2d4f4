import Dispatch
import RelayTestSupport
import Synchronization
import Testing

@testable import EventLoops

/// State the tests touch only on one loop's thread.
final class LoopConfined<Value>: @unchecked Sendable {
    // @unchecked: `value` is used only inside work run by one loop (each test says which).
    var value: Value
    init(_ value: Value) { self.value = value }
}

extension EventLoopsSuite {
    @Suite struct EventLoopTests {
        @Test func currentNamesTheLoopWhoseThreadRunsTheCode() throws {
            let first = try EventLoop(name: "test-current-1")
            defer { first.stop() }
            let second = try EventLoop(name: "test-current-2")
            defer { second.stop() }
            #expect(EventLoop.current == nil)
            #expect(try first.performAndWait { EventLoop.current === first })
            #expect(try second.performAndWait { EventLoop.current === second })
            #expect(EventLoop.current == nil)
        }

        @Test func workFromManyThreadsRunsOnTheLoopInEachThreadsOrder() throws {
            let loop = try EventLoop(name: "test-execute")
            defer { loop.stop() }
            let threads = 4
            let perThread = 2_500
            let seen = LoopConfined([[Int]](repeating: [], count: threads))
            let offLoop = Atomic<Int>(0)
            let done = Recorder<Int>()
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for sequence in 0..<perThread {
                    loop.execute {
                        if !loop.isCurrent { offLoop.add(1, ordering: .relaxed) }
                        seen.value[thread].append(sequence)
                        if seen.value[thread].count == perThread { done.record(thread) }
                    }
                }
            }
            #expect(done.wait { $0.count == threads })
            let order = try loop.performAndWait { seen.value.map { $0 == Array(0..<perThread) } }
            #expect(order == [Bool](repeating: true, count: threads))
            #expect(offLoop.load(ordering: .relaxed) == 0)
            #expect(!loop.isCurrent)
        }

        @Test func sendsMadeWhileTheLoopIsBusyWakeItOnce() throws {
            let loop = try EventLoop(name: "test-coalesce")
            defer { loop.stop() }
            let release = DispatchSemaphore(value: 0)
            let busy = Recorder<Bool>()
            loop.execute {
                busy.record(true)
                release.wait()
            }
            #expect(busy.wait { !$0.isEmpty })
            let ran = Recorder<Int>()
            for index in 0..<1_000 { loop.execute { ran.record(index) } }
            release.signal()
            #expect(ran.wait { $0.count == 1_000 })
            #expect(ran.all == Array(0..<1_000))
            // One wake-up for the busy work, one for the thousand calls (each later send found one on its
            // way), one for the performAndWait below.
            let wakeUps = try loop.performAndWait { loop.wakeUps }
            #expect(wakeUps <= 3)
        }

        @Test func workQueuedOnTheLoopRunsWithoutAWakeUp() async throws {
            let loop = try EventLoop(name: "test-local")
            defer { loop.stop() }
            let ran = Recorder<String>()
            let wakeUps = try await loop.submit { () -> Int in
                let before = loop.wakeUps
                loop.execute { ran.record("execute") }
                loop.enqueue { ran.record("enqueue") }
                ran.record("first")
                return before
            }
            #expect(ran.wait { $0.count == 3 })
            #expect(ran.all == ["first", "execute", "enqueue"])
            let after = try await loop.submit { loop.wakeUps }
            // Only the two submits woke the loop.
            #expect(after == wakeUps + 1)
        }

        @Test func stopRunsWorkAlreadyHandedOverAndThenRefusesWork() throws {
            let loop = try EventLoop(name: "test-stop")
            let ran = Recorder<Int>()
            let release = DispatchSemaphore(value: 0)
            loop.execute { release.wait() }
            for index in 0..<100 { loop.execute { ran.record(index) } }
            DispatchQueue.global().async { release.signal() }
            loop.stop()
            #expect(ran.all.count == 100)
            #expect(!loop.execute { ran.record(-1) })
            #expect(throws: LoopError(.stopped, "")) { try loop.performAndWait { 1 } }
            loop.stop()  // a second stop returns at once
        }

        @Test func nowIsTheLoopsMillisecondClock() async throws {
            let loop = try EventLoop(name: "test-now")
            defer { loop.stop() }
            // Both read on the loop's thread: read after the `await`, the second clock also counted the wait for a
            // thread of the cooperative pool (1.6 s once, under ThreadSanitizer beside the rest of the suite).
            let (first, nanoseconds) = try await loop.submit { (loop.now, EventLoop.monotonicNanoseconds()) }
            #expect(first > 0)
            // uv_now and uv_hrtime read the same monotonic clock: within a few ms of each other.
            #expect(abs(Int64(nanoseconds / 1_000_000) - Int64(first)) < 1_000)
        }
    }
}

extension EventLoopsSuite.EventLoopTests {
    @Test func aLoopCanAskItselfToStop() throws {
        let exited = Recorder<Bool>()
        let loop = try EventLoop(name: "test-self-stop") { exited.record(true) }
        let closed = Recorder<ConnectionEvent>()
        let (_, port) = try startServer(on: loop, events: closed)
        let client = try TestClient(port: port)
        try client.send("x")
        _ = try client.receive(count: 1)
        // As a SIGTERM watcher would: from a callback on the loop itself.
        loop.execute { loop.requestStop() }
        loop.waitUntilStopped()
        #expect(closed.all.contains(.closed))
        #expect(exited.all == [true])
        #expect(client.readsEndOfInput())
        loop.stop()  // a stop after the loop has stopped returns at once
    }
}
