import APNsSimulator
import Foundation
import HTTP2Client
import MonotonicTime
import RelayTestSupport
import Synchronization
import TCPForwarder
import Testing

/// The relay's APNs client on a real network path: the simulator in a network namespace of its
/// own, reached through a veth pair and a delaying forwarder; faults made with iptables inside
/// the namespace and with the forwarder (docs/DESIGN.md, "Lifecycle").
@Suite(
    "APNs client on a real network", .serialized,
    .enabled(if: NetworkNamespace.available, Comment(rawValue: NetworkNamespace.unavailableReason ?? "")))
struct NetworkFaultTests {
    /// A simulator in its own namespace and a forwarder in front of it on loopback (whose
    /// 127.0.0.1 the simulator's certificate names).
    final class Path: Sendable {
        let namespace: NetworkNamespace
        let simulator: SimulatorFixture
        let forwarder: DelayingForwarder

        init(delay: Duration = .zero) throws {
            let namespace = try NetworkNamespace()
            self.namespace = namespace
            let host = namespace.innerAddress
            simulator = try namespace.run { try SimulatorFixture(host: host) }
            forwarder = try DelayingForwarder(to: host, port: simulator.simulator.port, delay: delay)
        }

        var origin: String { "https://127.0.0.1:\(forwarder.port)" }

        deinit { forwarder.stop() }

        func client(
            pingInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10),
            onEvent: (@Sendable (HTTP2ClientEvent) -> Void)? = nil
        ) throws -> APNsClientFixture {
            try APNsClientFixture(
                simulator: simulator, origin: origin, pingInterval: pingInterval, pingTimeout: pingTimeout,
                onEvent: onEvent)
        }

        /// How many times each id was delivered.
        func deliveries() -> [String: Int] {
            Dictionary(simulator.simulator.delivered.compactMap(\.collapseID).map { ($0, 1) }, uniquingKeysWith: +)
        }
    }

    static func statuses(_ results: [APNsClientFixture.Outcome]) -> [String] {
        statuses(results.map { ($0.id, $0.result) })
    }

    static func statuses(_ results: [(id: String, result: Result<HTTP2Response, HTTP2ClientError>)]) -> [String] {
        results.map { entry in
            switch entry.result {
            case .success(let response): "\(response.status)"
            case .failure(let error): "\(error)"
            }
        }
    }

    @Test func withA100MillisecondRoundTripThousandsOfPushesAreDeliveredOnceEachAndFast() async throws {
        let path = try Path(delay: .milliseconds(50))
        let apns = try path.client()
        defer { apns.client.shutdown() }
        #expect(try await apns.push().get().status == 200)
        let total = 3000
        let clients = 256
        let (results, elapsed) = await apns.closedLoop(total: total, clients: clients)
        let seconds = Double(elapsed.nanoseconds) / 1e9
        let rate = Double(total) / seconds
        print(
            "network: \(total) pushes, \(clients) concurrent, 50 ms each way: \(Int(rate)) pushes/s over 2 connections")
        #expect(results.count == total)
        let statuses = Self.statuses(results)
        #expect(statuses.allSatisfy { $0 == "200" }, "\(Dictionary(statuses.map { ($0, 1) }, uniquingKeysWith: +))")
        await Poll.suspendUntil(within: .seconds(5)) { path.simulator.simulator.statistics.delivered >= total + 1 }
        let delivered = path.deliveries()
        #expect(results.allSatisfy { delivered[$0.id] == 1 }, "each push delivered exactly once")
        #expect(apns.client.statistics.connectionsOpened == 2)
        // Pushes share each round trip: one push per round trip per connection would never have more than
        // one stream open on a connection.
        #expect(path.simulator.simulator.statistics.maxConcurrentStreamsSeen > 10)
        // The bound is 256 in flight / 0.1 s = 2,560/s; one push per round trip per connection would be
        // 20/s. Wall-clock, as a rate must be (the path's delay is real time), and measured on the client's
        // threads from the first push sent to the last answered (closedLoop), so a cooperative pool busy with
        // the suite's synchronous tests does not count against the client; alone it runs 2,200 to 2,400/s on
        // a shared 2-core machine. Not under a sanitizer: instrumented code runs several times slower, so any
        // rate floor fails there (1,219/s under AddressSanitizer); every other check above still runs.
        if Sanitizer.allows("the 1,500 pushes/s floor", because: "instrumented code runs several times slower") {
            #expect(rate >= 1500, "\(Int(rate)) pushes/s")
        }
    }

    /// The path goes dark once the burst is under way (30 pushes answered) and comes back once a push has
    /// failed in the dark (its deadline passed: the blackhole was felt), each step on the client's own
    /// thread as it sees the answers, whatever the test scheduler is doing.
    @Test func aBlackholeMidBurstAnswersEveryPushInTimeAndTheClientRecovers() async throws {
        let path = try Path(delay: .milliseconds(5))
        let apns = try path.client()
        defer { apns.client.shutdown() }
        #expect(try await apns.push().get().status == 200)
        let timeout = Duration.seconds(2)
        let steps = Mutex((dark: false, restored: ContinuousClock.Instant?.none))
        // Set once the path is back and the pushes after it have ended: how long until the first 200 (nil: none
        // within 8 s).
        let recovery = Mutex<Duration??>(nil)
        let results = await apns.burst(300, timeout: timeout, spread: .milliseconds(1500)) { outcome, answered in
            let step = steps.withLock { steps -> Int in
                if !steps.dark && answered >= 30 {
                    steps.dark = true
                    return 1
                }
                if steps.dark && steps.restored == nil && (try? outcome.result.get()) == nil {
                    steps.restored = .now  // marked before the blackhole goes, so the recovery is not flattered
                    return 2
                }
                return 0
            }
            switch step {
            case 1:
                DispatchQueue.global().async { try? path.namespace.blackhole(true) }
            case 2:
                DispatchQueue.global().async {
                    try? path.namespace.blackhole(false)
                    let restored = steps.withLock { $0.restored! }
                    // Pushes succeed again within seconds of the path coming back: sent from this thread, not a
                    // task, so the cooperative pool (busy with the suite's synchronous tests) delays none of them.
                    apns.firstSuccess(since: restored, within: .seconds(8), timeout: timeout) { after in
                        recovery.withLock { $0 = .some(after) }
                    }
                }
            default:
                break
            }
        }
        #expect(steps.withLock { $0.dark && $0.restored != nil }, "the path never went dark, or no push felt it")
        // Every push answered by its deadline plus a second, whatever the answer. Wall-clock: the deadlines
        // are the client's real timers on a real path; measured on the client's threads (burst).
        let late = results.filter { $0.took > timeout + .seconds(1) }
        #expect(late.isEmpty, "\(late.count) answered late, the latest after \(late.map(\.took).max() ?? .zero)")
        #expect(path.deliveries().values.allSatisfy { $0 == 1 }, "none delivered twice")
        #expect(results.contains { (try? $0.result.get().status) == 200 })
        await Poll.suspendUntil(within: .seconds(10)) { recovery.withLock { $0 != nil } }
        let recovered = recovery.withLock { $0 }
        // Wall-clock (the path's recovery is real time), from the moment the path came back to the first
        // 200, both taken on threads the test scheduler does not delay.
        let after = try #require(recovered ?? nil, "no push succeeded within 8 s of the path coming back")
        #expect(after < .seconds(6), "\(after)")
    }

    @Test func connectionsResetMidBurstOrWhileIdleLeaveTheNextPushesAll200() async throws {
        let path = try Path(delay: .milliseconds(5))
        let apns = try path.client()
        defer { apns.client.shutdown() }
        // Both connections up and proven.
        let warm = await apns.burst(50)
        #expect(Self.statuses(warm).allSatisfy { $0 == "200" })
        // Reset mid-burst (once 30 of its pushes are answered, from the client's thread as it sees them):
        // what was in flight may fail (APNs may have processed it), never twice.
        let resets = Counter()
        _ = await apns.burst(300, spread: .milliseconds(400)) { _, answered in
            if answered >= 30 && resets.value.add(1, ordering: .relaxed).newValue == 1 {
                DispatchQueue.global().async { path.forwarder.resetAll() }
            }
        }
        #expect(resets.count >= 1)
        #expect(path.deliveries().values.allSatisfy { $0 == 1 }, "none delivered twice")
        let after = await apns.burst(100)
        #expect(Self.statuses(after).allSatisfy { $0 == "200" }, "\(Self.statuses(after))")
        // Reset while idle (TCP RST from the middle, as a load balancer does), once every push is answered;
        // the next pushes go once the client has seen every reset (each connection retired): all 200.
        let replaced = apns.client.statistics.connectionsReplaced
        let open = path.forwarder.connectionCount
        path.forwarder.resetAll()
        #expect(
            await Poll.suspendUntil(within: .seconds(10)) {
                apns.client.statistics.connectionsReplaced >= replaced + open
            }, "the client did not see the resets")
        let afterIdle = await apns.burst(100)
        #expect(Self.statuses(afterIdle).allSatisfy { $0 == "200" }, "\(Self.statuses(afterIdle))")
        // The same with iptables answering every segment with a reset, then letting them through.
        try path.namespace.rejectWithReset(true)
        let refused = await apns.burst(20, timeout: .seconds(1))
        try path.namespace.rejectWithReset(false)
        #expect(!Self.statuses(refused).contains("200"))
        var recovered = false
        for _ in 0..<20 where !recovered {
            recovered = (try? await apns.push(timeout: .seconds(2)).get().status) == 200
        }
        #expect(recovered)
        let afterReject = await apns.burst(100)
        #expect(Self.statuses(afterReject).allSatisfy { $0 == "200" }, "\(Self.statuses(afterReject))")
        #expect(path.deliveries().values.allSatisfy { $0 == 1 }, "none delivered twice")
    }

    @Test func anIdleConnectionThatDiedSilentlyIsFoundByPingBeforeAPushNeedsIt() async throws {
        let path = try Path(delay: .milliseconds(5))
        let unanswered = Counter()
        let apns = try path.client(pingInterval: .milliseconds(700), pingTimeout: .milliseconds(700)) { event in
            if event.kind == .pingUnanswered { unanswered.value.add(1, ordering: .relaxed) }
        }
        defer { apns.client.shutdown() }
        #expect(try await apns.push().get().status == 200)
        // Answered PINGs keep the connection: two of them, seen by the simulator.
        let pings = path.simulator.simulator.statistics.pingsReceived
        #expect(
            await Poll.suspendUntil(within: .seconds(10)) {
                path.simulator.simulator.statistics.pingsReceived >= pings + 2
            }, "the client sent no PINGs")
        #expect(unanswered.count == 0)
        #expect(apns.client.statistics.connectionsOpened == 1)
        #expect(try await apns.push().get().status == 200)
        // The path goes dark and the middle forgets the connection (a NAT timeout): nothing tells
        // the client. The path comes back once a PING has gone unanswered.
        try path.namespace.blackhole(true)
        path.forwarder.forgetAll()
        let found = await Poll.suspendUntil(within: .seconds(10)) { unanswered.count >= 1 }
        try path.namespace.blackhole(false)
        #expect(found, "no PING went unanswered")
        // The push does not wait for its deadline: PING found the dead connection first. Wall-clock, bounded
        // generously below the 8 s deadline (the client's timers are real time); measured on its thread.
        let push = await apns.burst(1, timeout: .seconds(8))[0]
        #expect((try? push.result.get().status) == 200, "\(push.result)")
        #expect(push.took < .seconds(3))
        #expect(apns.client.statistics.connectionsReplaced >= 1)
    }
}

/// A count shared with the client's threads.
final class Counter: Sendable {
    let value = Atomic<Int>(0)
    var count: Int { value.load(ordering: .relaxed) }
}
