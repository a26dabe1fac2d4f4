import APNsSimulator
import Foundation
import HTTP2Client
import RelayTestSupport
import Synchronization
import Testing

/// The relay's APNs client on a real network path: the simulator in a network namespace of its
/// own, reached through a veth pair and a delaying forwarder; faults made with iptables inside
/// the namespace and with the forwarder (DESIGN.md, "Lifecycle"; issue 12).
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

        func client(pingInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10)) throws
            -> APNsClientFixture
        {
            try APNsClientFixture(
                simulator: simulator, origin: origin, pingInterval: pingInterval, pingTimeout: pingTimeout)
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
        let start = ContinuousClock.now
        let results = await apns.closedLoop(total: total, clients: clients)
        let elapsed = start.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
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
        // The bound is 256 in flight / 0.1 s = 2,560/s; one push per round trip per connection would be
        // 20/s. Alone it runs 2,200 to 2,400/s on a shared 2-core machine; beside the rest of the suite
        // it measured 40 to 2,300/s, so scripts/test runs this suite on its own, after the others.
        // Not under a sanitizer: instrumented code runs several times slower, so any rate floor fails there
        // (1,219/s under AddressSanitizer); every other check above still runs.
        if Sanitizer.allows("the 1,500 pushes/s floor", because: "instrumented code runs several times slower") {
            #expect(rate >= 1500, "\(Int(rate)) pushes/s")
        }
    }

    @Test func aBlackholeMidBurstAnswersEveryPushInTimeAndTheClientRecovers() async throws {
        let path = try Path(delay: .milliseconds(5))
        let apns = try path.client()
        defer { apns.client.shutdown() }
        #expect(try await apns.push().get().status == 200)
        let timeout = Duration.seconds(2)
        async let burst = apns.burst(300, timeout: timeout, spread: .milliseconds(1500))
        try await Task.sleep(for: .milliseconds(500))
        try path.namespace.blackhole(true)
        try await Task.sleep(for: .milliseconds(2000))
        try path.namespace.blackhole(false)
        let results = await burst
        let restored = ContinuousClock.now
        // Every push answered by its deadline plus a second, whatever the answer.
        let late = results.filter { $0.took > timeout + .seconds(1) }
        #expect(late.isEmpty, "\(late.count) answered late, the latest after \(late.map(\.took).max() ?? .zero)")
        #expect(path.deliveries().values.allSatisfy { $0 == 1 }, "none delivered twice")
        #expect(results.contains { (try? $0.result.get().status) == 200 })
        // Pushes succeed again within seconds of the path coming back.
        var recovered = false
        while !recovered && restored.duration(to: .now) < .seconds(8) {
            recovered = (try? await apns.push(timeout: .seconds(2)).get().status) == 200
        }
        #expect(recovered)
        #expect(restored.duration(to: .now) < .seconds(6))
    }

    @Test func connectionsResetMidBurstOrWhileIdleLeaveTheNextPushesAll200() async throws {
        let path = try Path(delay: .milliseconds(5))
        let apns = try path.client()
        defer { apns.client.shutdown() }
        // Both connections up and proven.
        let warm = await apns.burst(50)
        #expect(Self.statuses(warm).allSatisfy { $0 == "200" })
        // Reset mid-burst: what was in flight may fail (APNs may have processed it), never twice.
        async let burst = apns.burst(300, spread: .milliseconds(400))
        try await Task.sleep(for: .milliseconds(200))
        path.forwarder.resetAll()
        _ = await burst
        #expect(path.deliveries().values.allSatisfy { $0 == 1 }, "none delivered twice")
        let after = await apns.burst(100)
        #expect(Self.statuses(after).allSatisfy { $0 == "200" }, "\(Self.statuses(after))")
        // Reset while idle (TCP RST from the middle, as a load balancer does): the next pushes all 200.
        try await Task.sleep(for: .milliseconds(200))
        path.forwarder.resetAll()
        try await Task.sleep(for: .milliseconds(100))
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
        let apns = try path.client(pingInterval: .milliseconds(700), pingTimeout: .milliseconds(700))
        defer { apns.client.shutdown() }
        #expect(try await apns.push().get().status == 200)
        // An answered PING keeps the connection.
        try await Task.sleep(for: .milliseconds(2000))
        #expect(apns.client.statistics.connectionsOpened == 1)
        #expect(try await apns.push().get().status == 200)
        // The path goes dark and the middle forgets the connection (a NAT timeout): nothing tells
        // the client. Then the path comes back.
        try path.namespace.blackhole(true)
        path.forwarder.forgetAll()
        try await Task.sleep(for: .milliseconds(1800))
        try path.namespace.blackhole(false)
        try await Task.sleep(for: .milliseconds(300))
        // The push does not wait for its deadline: PING found the dead connection first.
        let push = await apns.burst(1, timeout: .seconds(8))[0]
        #expect((try? push.result.get().status) == 200, "\(push.result)")
        #expect(push.took < .seconds(3))
        #expect(apns.client.statistics.connectionsReplaced >= 1)
    }
}
